"""Gradients of a scalar objective with respect to each head's output, and attribution patching's estimate.

A forward pre-hook on each candidate layer's ``o_proj`` adds a zero tensor ``delta`` [B, T, H * D] that requires
grad to the heads' outputs (its input): d objective / d delta is the gradient with respect to every head's output
slice at every position, through every later layer (the forward is otherwise unchanged, so the objective is the
clean one). The model's own parameters are frozen for the backward pass and restored afterwards.

Attribution patching (Nanda 2023; Syed, Rager and Conmy 2023) estimates the effect of zeroing head (l, h) at every
position by the first-order Taylor term: objective(clean) - objective(head zeroed) ~= sum_t grad_t . x_t over the
head's slice, with x the clean output. ``head_attributions`` returns it per batch row [B, L, H].
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from helpers.engine.head_zeroing import output_projections


@dataclass
class HeadGradients:
    """What one forward and backward pass gave: the objective per batch row and, per candidate layer, the heads'
    outputs and their gradients [B, T, H, D] (both detached, fp32)."""

    objective: torch.Tensor  # [B]
    outputs: list[torch.Tensor]  # L x [B, T, H, D]
    grads: list[torch.Tensor]  # L x [B, T, H, D]

    def attributions(self, positions: torch.Tensor | None = None) -> torch.Tensor:
        """[B, L, H]: sum over positions (bool [B, T] picks some; None: all) and the head's dims of grad * output."""
        per_layer = []
        for x, g in zip(self.outputs, self.grads):
            product = (x * g).sum(-1)  # [B, T, H]
            if positions is not None:
                product = product * positions.to(product.device)[:, :, None].float()
            per_layer.append(product.sum(1))
        return torch.stack(per_layer, 1)


@contextmanager
def _frozen(model):
    flags = [(p, p.requires_grad) for p in model.parameters()]
    for p, _ in flags:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, flag in flags:
            p.requires_grad_(flag)


def head_output_gradients(loaded, inputs: dict, objective: Callable[[torch.Tensor], torch.Tensor]) -> HeadGradients:
    """One forward of ``inputs`` (any batch) and one backward of ``objective(logits)`` ([B, T, V] -> [B]; the rows
    are summed for the backward, so each row's gradients are its own).

    Returns the objective [B] and, per candidate layer, the heads' clean outputs and gradients [B, T, H, D]."""
    adapter = loaded.adapter
    n_heads, head_dim = adapter.n_heads, adapter.head_dim
    projections = output_projections(loaded)
    seen: list = [None] * len(projections)

    def make_hook(layer: int):
        def hook(module, args):
            (x, *rest) = args
            delta = torch.zeros_like(x, requires_grad=True)
            seen[layer] = (x.detach(), delta)
            return (x + delta, *rest)

        return hook

    device = loaded.model.device
    moved = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    hooks = [o_proj.register_forward_pre_hook(make_hook(layer)) for layer, o_proj in enumerate(projections)]
    try:
        with _frozen(loaded.model), torch.enable_grad():
            logits = loaded.model(**moved).logits
            value = objective(logits)
            if value.ndim != 1 or value.shape[0] != logits.shape[0]:
                raise ValueError(
                    f"objective must give one value per batch row [{logits.shape[0]}], got {tuple(value.shape)}"
                )
            value.sum().backward()
    finally:
        for hook in hooks:
            hook.remove()
    missing = [layer for layer, entry in enumerate(seen) if entry is None]
    if missing:
        raise RuntimeError(f"candidate layers {missing} never ran: their heads have no gradient")
    outputs, grads = [], []
    for x, delta in seen:
        shape = (*x.shape[:2], n_heads, head_dim)
        grad = delta.grad if delta.grad is not None else torch.zeros_like(x)
        outputs.append(x.float().reshape(shape).cpu())
        grads.append(grad.float().reshape(shape).cpu())
    return HeadGradients(objective=value.detach().float().cpu(), outputs=outputs, grads=grads)


def head_attributions(
    loaded, inputs: dict, objective: Callable[[torch.Tensor], torch.Tensor], positions: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attribution patching: ([B, L, H] grad . output summed over ``positions`` (None: all) and the head's dims,
    the objective [B]). Estimates objective(clean) - objective(head's output zeroed at those positions)."""
    result = head_output_gradients(loaded, inputs, objective)
    return result.attributions(positions), result.objective
