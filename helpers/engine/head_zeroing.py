"""Zero chosen heads' outputs: each head's slice of its layer's output-projection input set to 0, at every position.

The single-head ablation of the causal references (helpers.measures.methods.causal): batch row b of a forward runs
with the heads of ``heads[b]`` removed from the residual stream, by a forward pre-hook on each candidate layer's
``o_proj`` (the attention output [B, T, H * D] enters it head-major: head h is columns [h D, (h + 1) D)). Nothing is
written into the weights, and heads not chosen are untouched (their slices pass through as they are).

helpers.engine.masking's "output_zero" (another engineer's, applied inside the attention function at chosen rows)
reaches the same result at rows="all"; this module needs no attention function and also serves the gradient hooks
of helpers.engine.head_grads.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch


def output_projections(loaded) -> list[torch.nn.Module]:
    """Each candidate layer's output projection (``self_attn.o_proj``), whose input holds the heads' outputs
    side by side [.., H * head_dim]; a family without one is refused (ValueError)."""
    adapter = loaded.adapter
    width = adapter.n_heads * adapter.head_dim
    projections = []
    for layer, module in zip(adapter.candidate_layers, adapter.attention_modules(loaded.model)):
        o_proj = getattr(module, "o_proj", None)
        if not isinstance(o_proj, torch.nn.Linear) or o_proj.in_features != width:
            raise ValueError(
                f"decoder layer {layer} has no o_proj Linear taking {adapter.n_heads} heads x {adapter.head_dim} "
                f"= {width} inputs (found {type(o_proj).__name__}); head outputs cannot be reached in this family"
            )
        projections.append(o_proj)
    return projections


def head_columns(loaded) -> torch.Tensor:
    """[H * head_dim] long: the head each column of an o_proj input belongs to."""
    return torch.arange(loaded.adapter.n_heads).repeat_interleave(loaded.adapter.head_dim)


@contextmanager
def zero_head_outputs(loaded, heads: torch.Tensor):
    """Inside, every forward (and generate step) runs with the output of head (l, h) set to 0 in batch row b
    wherever ``heads[b, l, h]`` (bool [B, L, H], candidate layers), at every position. A layer holding a chosen
    head that never runs inside the block raises RuntimeError; a forward of another batch size raises ValueError."""
    adapter = loaded.adapter
    n_layers, n_heads = len(adapter.candidate_layers), adapter.n_heads
    if not isinstance(heads, torch.Tensor) or heads.dtype != torch.bool or heads.ndim != 3:
        raise ValueError("heads must be a bool tensor [batch, layers, heads]")
    if tuple(heads.shape[1:]) != (n_layers, n_heads):
        raise ValueError(f"heads has shape {tuple(heads.shape)}; this model needs [batch, {n_layers}, {n_heads}]")
    columns = head_columns(loaded)
    projections = output_projections(loaded)
    calls = [0] * n_layers
    hooks = []

    def make_hook(layer: int):
        zeroed = heads[:, layer][:, columns]  # [B, H * D]

        def hook(module, args):
            (x, *rest) = args
            if x.shape[0] != zeroed.shape[0]:
                raise ValueError(
                    f"zero_head_outputs was given {zeroed.shape[0]} batch rows, the forward has {x.shape[0]}"
                )
            calls[layer] += 1
            where = zeroed.to(x.device)[:, None, :]  # [B, 1, H * D]
            return (torch.where(where, torch.zeros((), dtype=x.dtype, device=x.device), x), *rest)

        return hook

    for layer, o_proj in enumerate(projections):
        if heads[:, layer].any():
            hooks.append(o_proj.register_forward_pre_hook(make_hook(layer)))
    try:
        yield
    finally:
        for hook in hooks:
            hook.remove()
    missed = [layer for layer in range(n_layers) if heads[:, layer].any() and calls[layer] == 0]
    if missed:
        raise RuntimeError(
            f"the zeroed heads' layers {missed} never ran inside zero_head_outputs: nothing was changed"
        )
