"""Many head-sets per forward: one item copied once per head-set, each copy carrying its own set.

``run_head_sets`` gives the same logits as one ``probe`` call per head-set, while the work the copies
share (the vision tower, the decoder layers below the first intervened layer) runs once at batch 1.
"""

from __future__ import annotations

import copy
from contextlib import contextmanager

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


# Copies x positions per forward when the caller does not say. Above it the copies go through the text
# backbone in several forwards that share one run of the vision tower. On 1 CPU thread, the paper-shaped VLM
# (1,600 positions, 4,096 wide) ran S + 20 sets at 1.60-1.65x a loop of single calls with 1-2 copies per
# forward, 1.53x with 4, 1.20x with 10 and 0.97x with all 21 (activations streamed from memory); the toy's
# 40-150-position items fit 27-100 copies, where the toy runs best. A GPU wants more: pass max_tokens.
COPY_TOKENS = 4096


@torch.no_grad()
def run_head_sets(
    loaded,
    item: dict,
    heads: torch.Tensor,
    keys: torch.Tensor,
    bias: float | torch.Tensor,
    rows: Rows = "all",
    logits_to_keep: int = 0,
    max_tokens: int = COPY_TOKENS,
) -> torch.Tensor:
    """Logits [n, T, V] of one item under n head-sets: the same as n probe calls, sharing their common work.

    ``item``: a one-item processor output (batch 1, T positions). ``heads``: [n, L, H] (stack_head_sets).
    ``keys`` and ``rows``: [1, T] (the same for every set) or [n, T]; ``rows`` may be "all". ``bias``: a
    float, HIDE or an [n] tensor, as in Intervention. ``logits_to_keep``: as in transformers (1: the output
    head runs only at the last position, logits [n, 1, V]; 0: every position). ``max_tokens``: copies x T
    per forward; more copies run in several forwards that reuse the first one's vision-tower output.

    When no copy intervenes before position p0 and every image token lies before p0 (the prompt's rows or its
    last row only, with ``logits_to_keep`` >= 1), positions [0, p0) run once at batch 1 with the vision tower and
    the copies compute only [p0, T) against their cached keys and values (the engine's decode-step path).
    Otherwise the copies agree up to the first decoder layer d0 that holds a head of any set, so the vision tower
    runs once for all of them, the decoder layers below d0 once per forward at batch 1, and the hidden
    states entering layer d0 are repeated once per copy. When d0 < ``adapter.min_split_layer`` (Qwen3-VL
    adds visual features after its first layers; Gemma 4 may reuse earlier layers' keys) the copies are made
    at the text backbone's input instead (the vision tower still runs once).
    """
    if item["input_ids"].shape[0] != 1:
        raise ValueError(f"run_head_sets takes a single item (batch 1), got batch {item['input_ids'].shape[0]}")
    if not isinstance(heads, torch.Tensor) or heads.dtype != torch.bool or heads.ndim != 3:
        raise ValueError("heads must be a bool tensor [n_sets, layers, heads]; build it with stack_head_sets")
    n = heads.shape[0]
    keys = _per_copy("keys", keys, n)
    rows = rows if isinstance(rows, str) else _per_copy("rows", rows, n)
    per_forward = max(1, max_tokens // item["input_ids"].shape[1])
    parts = [slice(start, start + per_forward) for start in range(0, n, per_forward)]  # the copies of each forward
    prefix_length = _unchanged_prefix(loaded.adapter, item, rows, logits_to_keep)
    if prefix_length:
        return _from_prefix(loaded, item, heads, keys, bias, rows, logits_to_keep, prefix_length, parts)
    if n <= per_forward:
        return _one_forward(loaded, item, heads, keys, bias, rows, logits_to_keep)
    with _vision_once(loaded.model):
        return torch.cat(
            [
                _one_forward(loaded, item, heads[s], keys[s], _copies(bias, s, n), _copies(rows, s, n), logits_to_keep)
                for s in parts
            ]
        )


def _unchanged_prefix(adapter, item: dict, rows, logits_to_keep: int) -> int:
    """p0 > 0 when positions [0, p0) are the same in every copy and hold every image token (0: run whole copies).

    No copy intervenes at a row before the first chosen row p0, and under a causal mask those rows see no
    later row, so they are the clean item's; with the images among them, positions [p0, T) are plain text
    that continues from the cache (position ids included, as in a decode step). The rows whose logits are
    kept must lie in [p0, T), and the item has no pads (its positions then follow from the cache alone)."""
    padded = "attention_mask" in item and not bool(item["attention_mask"].all())
    if isinstance(rows, str) or logits_to_keep < 1 or padded or not adapter.continues_from_cache:
        return 0
    chosen = rows.any(0).nonzero().flatten()  # [r] rows some copy intervenes at
    images = adapter.image_positions(item["input_ids"])[0].nonzero().flatten()  # [i]
    if chosen.numel() == 0 or images.numel() == 0:
        return 0
    start = int(chosen[0])
    fits = int(images[-1]) < start <= item["input_ids"].shape[1] - logits_to_keep
    return start if fits else 0


def _from_prefix(loaded, item: dict, heads, keys, bias, rows, logits_to_keep: int, start: int, parts: list[slice]):
    """run_head_sets' logits when positions [0, start) are the clean item's (_unchanged_prefix): they run once,
    at batch 1 and with the images, into a cache; each forward of copies then runs positions [start, T) of the
    text only, as a continuation of that cache repeated once per copy of the forward (``parts``)."""
    model, n = loaded.model, heads.shape[0]
    length = item["input_ids"].shape[1]
    per_position = [name for name, v in item.items() if isinstance(v, torch.Tensor) and tuple(v.shape) == (1, length)]
    prefix = {name: value[:, :start] if name in per_position else value for name, value in item.items()}
    cache = model(**prefix, use_cache=True).cache
    # no attention mask: one item has no pads, and positions continue from the cache as in a decode step
    text = {name: item[name][:, start:] for name in per_position if name != "attention_mask"}  # [1, T - start]
    same_item = _one_for_all(keys) and _one_for_all(rows) and _uniform(bias)
    logits = []
    for part in parts:
        copies = heads[part].shape[0]
        part_cache = copy.deepcopy(cache)
        part_cache.batch_repeat_interleave(copies)
        spec = Intervention(heads=heads[part], keys=keys[part], rows=rows[part], bias=_copies(bias, part, n))
        with _probe(loaded, None, spec, same_item=same_item):
            inputs = {name: value.expand(copies, -1) for name, value in text.items()}
            logits.append(model(**inputs, cache=part_cache, use_cache=True, logits_to_keep=logits_to_keep).logits)
    return torch.cat(logits)


def _one_forward(loaded, item: dict, heads, keys, bias, rows, logits_to_keep: int) -> torch.Tensor:
    """run_head_sets' copies [n] in one forward; keys and rows [n, T] (or rows "all")."""
    n = heads.shape[0]
    spec = Intervention(heads=heads, keys=keys, rows=rows, bias=bias)
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
    # the copies differ only in their heads when keys, rows and bias are one for all: the engine then builds
    # their biased mask once and broadcasts it
    same_item = _one_for_all(keys) and (isinstance(rows, str) or _one_for_all(rows)) and _uniform(bias)
    try:
        with _probe(loaded, None, spec, shared_layers=shared, same_item=same_item):
            return loaded.model(**item, use_cache=False, logits_to_keep=logits_to_keep).logits
    finally:
        hook.remove()


def _copies(value, part: slice, n: int):
    """The share of one forward's copies of a per-copy value ([n, ...] tensor); anything else as it is."""
    return value[part] if isinstance(value, torch.Tensor) and value.ndim >= 1 and value.shape[0] == n else value


def _one_for_all(selection: torch.Tensor) -> bool:
    """A [n, T] selection that is one [1, T] row for every copy (expanded: stride 0 along the copies)."""
    return selection.shape[0] == 1 or selection.stride(0) == 0


@contextmanager
def _vision_once(model):
    """Inside, every module's ``get_image_features`` (the vision tower and projector, in every family that has
    one) computes its output on the first call and returns that same output to later calls with the same
    pixel tensor: the copies' forwards share one run of the vision tower."""
    owners = [m for m in model.modules() if "get_image_features" in type(m).__dict__]
    for owner in owners:
        original = owner.get_image_features
        memo = {}

        def once(pixel_values, *args, _original=original, _memo=memo, **kwargs):
            if _memo.get("pixels") is not pixel_values:
                _memo.update(pixels=pixel_values, output=_original(pixel_values, *args, **kwargs))
            return _memo["output"]

        owner.get_image_features = once
    try:
        yield
    finally:
        for owner in owners:
            del owner.get_image_features  # the class's method again


def _uniform(bias: float | torch.Tensor) -> bool:
    """One bias for every copy: a float, or an [n] tensor of one value."""
    return not isinstance(bias, torch.Tensor) or bias.ndim == 0 or bool((bias == bias.flatten()[0]).all())


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
