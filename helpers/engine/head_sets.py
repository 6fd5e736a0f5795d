"""Many head-sets per forward: one item copied once per head-set, each copy carrying its own set.

``run_head_sets`` gives the same logits as one ``probe`` call per head-set, while the work the copies
share (the vision tower, the decoder layers below the first intervened layer) runs once at batch 1.
"""

from __future__ import annotations

import torch

from helpers.engine.attention import Intervention, Rows, _prepare_intervention, _probe


def heads_to_mask(adapter, heads: list[tuple[int, int]], device="cpu") -> torch.Tensor:
    """A head-set given as (candidate layer, head) pairs -> bool [L, H]."""
    n_layers, n_heads = len(adapter.candidate_layers), adapter.n_heads
    mask = torch.zeros(n_layers, n_heads, dtype=torch.bool, device=device)
    for layer, head in heads:
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ValueError(
                f"head ({layer}, {head}) is out of range: layers 0..{n_layers - 1} "
                f"(candidate layers {adapter.candidate_layers}), heads 0..{n_heads - 1}"
            )
        mask[layer, head] = True
    return mask


def stack_head_sets(adapter, head_sets: list[list[tuple[int, int]]], device="cpu") -> torch.Tensor:
    """Several head-sets -> bool [n_sets, L, H], one per batch row (pair with expand_item)."""
    return torch.stack([heads_to_mask(adapter, heads, device) for heads in head_sets])


def expand_item(inputs: dict, n: int) -> dict:
    """Repeat a one-item processor output n times along the batch (pixel tensors included)."""
    batch = inputs["input_ids"].shape[0]
    if batch != 1:
        raise ValueError(f"expand_item takes a single item (batch 1), got batch {batch}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    return {
        name: value.repeat(n, *[1] * (value.ndim - 1)) if isinstance(value, torch.Tensor) else value
        for name, value in inputs.items()
    }


@torch.no_grad()
def run_head_sets(
    loaded,
    item: dict,
    heads: torch.Tensor,
    keys: torch.Tensor,
    bias: float | torch.Tensor,
    rows: Rows = "all",
    logits_to_keep: int = 0,
) -> torch.Tensor:
    """Logits [n, T, V] of one item under n head-sets: the same as n probe calls, sharing their common work.

    ``item``: a one-item processor output (batch 1, T positions). ``heads``: [n, L, H] (stack_head_sets).
    ``keys`` and ``rows``: [1, T] (the same for every set) or [n, T]; ``rows`` may be "all". ``bias``: a
    float, HIDE or an [n] tensor, as in Intervention. ``logits_to_keep``: as in transformers (1: the output
    head runs only at the last position, logits [n, 1, V]; 0: every position).

    The copies agree up to the first decoder layer d0 that holds a head of any set, so the vision tower
    and the decoder layers below d0 run once at batch 1 and the hidden states entering layer d0 are
    repeated n times. When d0 < ``adapter.min_split_layer`` (Qwen3-VL adds visual features after its
    first layers; Gemma 4 may reuse earlier layers' keys) the copies are made at the text backbone's input
    instead (the vision tower still runs once).
    """
    if item["input_ids"].shape[0] != 1:
        raise ValueError(f"run_head_sets takes a single item (batch 1), got batch {item['input_ids'].shape[0]}")
    if not isinstance(heads, torch.Tensor) or heads.dtype != torch.bool or heads.ndim != 3:
        raise ValueError("heads must be a bool tensor [n_sets, layers, heads]; build it with stack_head_sets")
    n = heads.shape[0]
    spec = Intervention(
        heads=heads,
        keys=_per_copy("keys", keys, n),
        rows=rows if isinstance(rows, str) else _per_copy("rows", rows, n),
        bias=bias,
    )
    adapter = loaded.adapter
    used = heads.any(0).any(-1).nonzero().flatten()  # candidate layers holding a head
    if used.numel() == 0:  # every set is empty: the clean forward
        _prepare_intervention(spec, len(adapter.candidate_layers), adapter.n_heads)
        return loaded.model(**item, use_cache=False, logits_to_keep=logits_to_keep).logits.repeat(n, 1, 1)
    first = int(used[0])
    split = adapter.candidate_layers[first]  # d0, a decoder-layer index
    text_model = adapter.language_model(loaded.model)
    if split >= adapter.min_split_layer:
        shared = first
        hook = text_model.layers[split].register_forward_pre_hook(
            lambda module, args, kwargs: _repeat_layer_input(args, kwargs, n), with_kwargs=True
        )
    else:
        shared = 0
        hook = text_model.register_forward_pre_hook(
            lambda module, args, kwargs: (args, _repeat_text_inputs(adapter, kwargs, n)), with_kwargs=True
        )
    try:
        with _probe(loaded, None, spec, shared_layers=shared):
            return loaded.model(**item, use_cache=False, logits_to_keep=logits_to_keep).logits
    finally:
        hook.remove()


def _per_copy(name: str, selection: torch.Tensor, n: int) -> torch.Tensor:
    """A [1, T] or [n, T] selection -> [n, T]."""
    if not isinstance(selection, torch.Tensor) or selection.ndim != 2 or selection.shape[0] not in (1, n):
        raise ValueError(
            f"{name} must be a bool tensor [1, T] or [{n}, T], got "
            f"{type(selection).__name__} {tuple(getattr(selection, 'shape', ()))}"
        )
    return selection.expand(n, -1)


def _repeat_layer_input(args: tuple, kwargs: dict, n: int):
    """Pre-hook of decoder layer d0: hidden states [1, T, D] -> [n, T, D]; mask and rotary tables broadcast."""
    if args:
        return (args[0].repeat(n, 1, 1), *args[1:]), kwargs
    return args, dict(kwargs, hidden_states=kwargs["hidden_states"].repeat(n, 1, 1))


def _repeat_text_inputs(adapter, kwargs: dict, n: int) -> dict:
    """Pre-hook of the text backbone: every per-item input repeated to batch n by the family's adapter."""
    out = dict(kwargs)
    for name, value in kwargs.items():
        if value is None or not isinstance(value, (torch.Tensor, list, dict)):
            continue
        repeated = adapter.repeat_text_input(name, value, n)
        if repeated is None:
            raise ValueError(
                f"run_head_sets does not know how to repeat the text backbone's input {name!r} "
                f"({adapter.family}): add it to the adapter's repeat_text_input"
            )
        out[name] = repeated
    return out
