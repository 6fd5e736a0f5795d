"""Many head-sets per forward: one item copied once per head-set, each copy carrying its own set.

``run_head_sets`` gives the same logits as one ``probe`` call per head-set, while the work the copies
share runs once: the vision tower (once per item, remembered across calls), the rows before the first row any
copy changes (once per item, remembered across calls) or else the decoder layers below the first intervened
layer (once per call, at batch 1).
"""

from __future__ import annotations

import numbers
import weakref
from collections import OrderedDict
from contextlib import contextmanager, nullcontext
from dataclasses import replace

import numpy as np
import torch

from helpers.engine import attention, copy_ledger
from helpers.engine.attention import Intervention, QueryRows, prepare_intervention, probe_state
from helpers.engine.inputs import Batch, item_batch, one_item_inputs
from helpers.engine.item import Item
from helpers.engine.kept_rows import last_layer_at_kept_rows
from helpers.engine.masking import KEYED, check_masking
from helpers.storage import timers


def as_head_sets(heads) -> torch.Tensor:
    """Head-sets as a bool tensor [n, layers, heads], from a tensor or an array (e.g. controls.with_controls)."""
    heads = torch.as_tensor(heads)
    if heads.dtype != torch.bool or heads.ndim != 3:
        raise ValueError(
            f"heads must be bool [n_sets, layers, heads], got {heads.dtype} {tuple(heads.shape)}; "
            "build them with stack_head_sets or measures.controls.with_controls"
        )
    if heads.shape[0] == 0:
        raise ValueError(f"heads holds no head-set ({tuple(heads.shape)}); pass at least one [layers, heads] set")
    return heads


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
# (1,600 positions) ran a copy in 1.43 s at 1 copy per forward and 1.56 s at 2 (their activations no longer fit
# the caches; 0.97x a loop of single calls with all 21 in one forward); the toy's 40-150-position items fit
# 13-50 copies, where the toy runs best. A GPU wants more: pass max_tokens.
COPY_TOKENS = 2048


@torch.no_grad()
@timers.timed("forward")
def run_head_sets(
    loaded,
    item: Item | Batch | dict,
    heads: torch.Tensor | np.ndarray,
    keys: torch.Tensor | None,
    bias: float | torch.Tensor,
    query_rows: QueryRows = "all",
    logits_to_keep: int = 0,
    max_tokens: int = COPY_TOKENS,
    masking: str = "hide",
    factor: float | torch.Tensor = 0.0,
) -> torch.Tensor:
    """Logits [n, T, V] of one item under n head-sets: the same as n probe calls, sharing their common work.

    ``item``: an Item (built with the model's processor), a Batch of one item (build_batch; pass it again to reuse
    what an earlier call remembered) or a one-item processor output (batch 1, T positions), each checked against the
    family's input layout before any forward (Adapter.check_inputs). ``heads``: bool [n, L, H] (stack_head_sets,
    or an array such as measures.controls.with_controls gives). ``keys`` and ``query_rows``: [1, T] (the same for
    every set) or [n, T], on any device; ``query_rows`` may be "all". ``bias``: a
    float, HIDE or an [n] tensor, as in Intervention. ``logits_to_keep``: as in transformers (1: the output
    head runs only at the last position, logits [n, 1, V]; 0: every position). ``max_tokens``: copies x T
    per forward; more copies run in several forwards that reuse the first one's vision-tower output.
    ``masking`` and ``factor``: as in Intervention (helpers.engine.masking); the maskings that act on every key
    do not use ``keys`` (None is fine).

    With ``logits_to_keep`` >= 1, when rows [0, p0) are the same in every copy (before the first chosen row, or
    before the first key a keyed masking changes, which they cannot see: _unchanged_prefix), the copies run only
    rows [p0, T), continuing the clean item's keys and values of rows [0, p0) in every attention layer, their text
    backbone taking the clean item's input embeddings of rows [p0, T) (_from_prefix). Within the rows a forward
    runs, the copies agree up to the first decoder layer d0 that holds a head of any set: the decoder layers below
    d0 run once per forward at batch 1 and the hidden states entering layer d0 are repeated once per copy. When d0 <
    ``adapter.min_split_layer`` (Qwen3-VL adds visual features after its first layers; Gemma 4 may reuse earlier
    layers' keys) the copies are made at the text backbone's input instead. The vision tower runs once per item:
    its output is remembered for the item's pixel tensor (_Memo).
    """
    item = on_device(loaded, one_item_inputs(loaded, item))
    length = item["input_ids"].shape[1]
    _check_sizes(logits_to_keep, max_tokens, length)
    device = loaded.model.device
    heads = as_head_sets(heads).to(device)
    n = heads.shape[0]
    check_masking(masking)
    keys = _per_copy("keys", keys, n, length, device) if masking in KEYED else None  # the others act on every key
    query_rows = query_rows if isinstance(query_rows, str) else _per_copy("query_rows", query_rows, n, length, device)
    bias, factor = _floats("bias", bias, n), _floats("factor", factor, n)
    spec = Intervention(heads=heads, keys=keys, bias=bias, query_rows=query_rows, masking=masking, factor=factor)
    prepare_intervention(spec, len(loaded.adapter.candidate_layers), loaded.adapter.n_heads)  # before any forward
    per_forward = max(1, max_tokens // item["input_ids"].shape[1])
    parts = [slice(start, start + per_forward) for start in range(0, n, per_forward)]  # the copies of each forward
    start = _unchanged_prefix(loaded.adapter, item, spec, logits_to_keep)
    # the clean item's record costs about a copy's forward where no earlier call left it (remember_item)
    prefix = start and (n * start >= item["input_ids"].shape[1] or _CLEAN.holds(loaded.model, list(item.values())))
    counter = copy_ledger.active_counter()  # a run's copy ledger, if one is installed or open
    counting = nullcontext()
    if counter is not None:
        counting = counter.counted(loaded, item, spec, start if prefix else 0, logits_to_keep, per_forward)
    with counting:
        if prefix:
            return _from_prefix(loaded, item, spec, logits_to_keep, start, parts)
        with _vision_once(loaded.model):
            return _forwards(loaded, item, spec, logits_to_keep, parts)


def _unchanged_prefix(adapter, item: dict, spec: Intervention, logits_to_keep: int) -> int:
    """p0 > 0 when positions [0, p0) are the clean item's in every copy (0: run whole copies).

    A row before the first chosen row is not intervened at, and under a causal mask a row before the first
    selected key of a keyed masking (hide, rescale) sees none of them; either way it sees no later row, so rows
    [0, p0) with p0 the later of the two are the clean item's. The other maskings change every chosen row
    whatever it sees, so p0 is the first chosen row (none with rows "all"): the leaky uniform attention of a
    chosen row reads later rows, but the rows before the first chosen one still read only earlier rows. An image
    is never split: p0 moves back to the first of the positions that may attend to each other both ways (the
    adapter's attending_both_ways: the image tokens, Molmo 2's with their markers) when they straddle it. The rows
    whose logits are kept must lie in [p0, T), a chosen row too, and the item has no pads."""
    padded = "attention_mask" in item and not bool(item["attention_mask"].all())
    if logits_to_keep < 1 or padded or not _continues_rows(adapter):
        return 0
    query_rows = spec.query_rows  # [n, T] or "all"
    start = 0
    if spec.masking in KEYED:
        selected = spec.keys.any(0).nonzero().flatten()  # [s] keys some copy changes
        if selected.numel() == 0:
            return 0
        start = int(selected[0])
    if not isinstance(query_rows, str):
        chosen = query_rows.any(0).nonzero().flatten()  # [r] rows some copy intervenes at
        if chosen.numel() == 0 or int(chosen[-1]) < start:
            return 0
        start = max(start, int(chosen[0]))
    joint = adapter.attending_both_ways(item)  # [i]
    if joint.numel() and int(joint[0]) < start <= int(joint[-1]):
        start = int(joint[0])
    return start if 0 < start <= item["input_ids"].shape[1] - logits_to_keep else 0


def _continues_rows(adapter) -> bool:
    """Copies of this family may continue a clean item's first rows: every decoder layer is softmax attention
    with its own keys (not Gemma 4, whose later layers reuse earlier layers' keys)."""
    return adapter.continues_from_cache and adapter.min_split_layer < adapter.n_layers


def _from_prefix(loaded, item: dict, spec: Intervention, logits_to_keep: int, start: int, parts: list[slice]):
    """run_head_sets' logits when positions [0, start) are the clean item's (_unchanged_prefix): the copies run only
    positions [start, T), each attention layer continuing the clean item's keys and values of rows [0, start)
    (``attention.continuing``; recorded once per item, ``_clean_item``), their text backbone taking the clean
    item's position ids and input embeddings of rows [start, T) (_later_inputs). The images go with the rows after
    ``start`` when they lie there (the vision tower then runs once)."""
    length = item["input_ids"].shape[1]
    first_rows, later_inputs = _clean_item(loaded, item, start)
    per_position = [name for name, v in item.items() if isinstance(v, torch.Tensor) and tuple(v.shape) == (1, length)]
    images_after = bool(loaded.adapter.image_positions(item["input_ids"])[0, start:].any())
    rest = {  # the one item's rows [start, T); no attention mask (no pads); the image inputs if the images are here
        name: value[:, start:] if name in per_position else value
        for name, value in item.items()
        if name != "attention_mask" and (name in per_position or images_after)
    }
    hook = loaded.adapter.language_model(loaded.model).register_forward_pre_hook(
        lambda module, args, kwargs: (args, dict(kwargs, **later_inputs)), with_kwargs=True
    )
    try:
        with attention.continuing(first_rows), _vision_once(loaded.model):
            return _forwards(loaded, rest, spec, logits_to_keep, parts, start)
    finally:
        hook.remove()


def _forwards(loaded, item: dict, spec: Intervention, logits_to_keep: int, parts: list[slice], offset: int = 0):
    """The logits [n, ...] of the copies, one _one_forward per part of them (``parts``: slices of the n copies)."""
    n = spec.heads.shape[0]
    if len(parts) == 1:
        return _one_forward(loaded, item, spec, logits_to_keep, offset)
    per_copy = ("heads", "keys", "bias", "query_rows", "factor")  # the fields that may hold one value per copy
    shares = [replace(spec, **{name: _copies(getattr(spec, name), s, n) for name in per_copy}) for s in parts]
    return torch.cat([_one_forward(loaded, item, share, logits_to_keep, offset) for share in shares])


def _one_forward(loaded, item: dict, spec: Intervention, logits_to_keep: int, offset: int = 0) -> torch.Tensor:
    """run_head_sets' copies [n] in one forward; keys and query_rows [n, T] (or query_rows "all", keys None).
    ``offset``: the first position ``item`` holds (_from_prefix: the item's rows [offset, T), keys and query_rows
    still over [0, T))."""
    heads, keys, query_rows = spec.heads, spec.keys, spec.query_rows
    n = heads.shape[0]
    adapter = loaded.adapter
    used = heads.any(0).any(-1).nonzero().flatten()  # candidate layers holding a head
    if used.numel() == 0:  # every set is empty: the clean forward
        prepare_intervention(spec, len(adapter.candidate_layers), adapter.n_heads)
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
    # the copies differ only in their heads when keys, rows, bias and factor are one for all: the engine then
    # builds their biased mask once and broadcasts it
    same_item = (
        (keys is None or _one_for_all(keys))
        and (isinstance(query_rows, str) or _one_for_all(query_rows))
        and _uniform(spec.bias)
        and _uniform(spec.factor)
    )
    # the last layer at the kept rows only, unless a copy intervenes there at rows that are not kept: that would
    # change no kept logit, and the probe's guard says so
    last_rows = logits_to_keep if _kept_rows_carry(heads, query_rows, logits_to_keep) else 0
    try:
        with (
            probe_state(loaded, None, spec, shared_layers=shared, same_item=same_item, offset=offset),
            last_layer_at_kept_rows(text_model, last_rows),
        ):
            return loaded.model(**item, use_cache=False, logits_to_keep=logits_to_keep).logits
    finally:
        hook.remove()


def _kept_rows_carry(heads: torch.Tensor, query_rows, keep: int) -> bool:
    """True when no copy intervenes at the last candidate layer or every copy's kept rows are chosen rows."""
    return keep >= 1 and (isinstance(query_rows, str) or not heads[:, -1].any() or bool(query_rows[:, -keep:].all()))


def _copies(value, part: slice, n: int):
    """The share of one forward's copies of a per-copy value ([n, ...] tensor); anything else as it is."""
    return value[part] if isinstance(value, torch.Tensor) and value.ndim >= 1 and value.shape[0] == n else value


def _one_for_all(selection: torch.Tensor) -> bool:
    """A [n, T] selection that is one [1, T] row for every copy (expanded: stride 0 along the copies)."""
    return selection.shape[0] == 1 or selection.stride(0) == 0


@contextmanager
def _vision_once(model):
    """Inside, every module's ``get_image_features`` (the vision tower and projector, in every family that has
    one) returns the output it computed for the same pixel tensor before, inside this context or an earlier
    one (_Memo): the copies' forwards, and every call on the same item, share one run of the vision tower."""
    refs = _VISION_OWNERS.get(model)
    if refs is None:
        refs = _VISION_OWNERS[model] = [
            weakref.ref(m) for m in model.modules() if "get_image_features" in type(m).__dict__
        ]
    owners = [ref() for ref in refs]
    for owner in owners:
        original = owner.get_image_features

        def once(pixel_values, *args, _original=original, _owner=owner, **kwargs):
            inputs = [pixel_values, *args, *kwargs.values()]
            with timers.timed("vision"):
                return _VISION.get_or_compute(_owner, inputs, lambda: _original(pixel_values, *args, **kwargs))

        owner.get_image_features = once
    try:
        yield
    finally:
        for owner in owners:
            del owner.get_image_features  # the class's method again


def on_device(loaded, inputs: dict) -> dict:
    """``inputs`` on the model's device, the same device tensors on every call for the same input tensors (while they
    live and are unchanged): the per-item memos below know an item by its tensors, so a copy made anew on each call
    would never be recognised on a GPU."""
    device = loaded.model.device
    return {name: _moved(loaded.model, value, device) for name, value in inputs.items()}


def _moved(model, value, device):
    """``value`` on ``device``: itself when it is there (or not a tensor), else its remembered copy (_ON_DEVICE)."""
    if not isinstance(value, torch.Tensor) or value.device == device:
        return value
    return _ON_DEVICE.get_or_compute(model, [value], lambda: value.to(device))


def remember_item(loaded, item: dict) -> None:
    """Record what run_head_sets reuses across calls on this one-item input (tensors on the model's device): the
    clean item's keys and values and its text backbone's inputs, and the vision tower's output. A process that
    forks workers afterwards hands the record to them (cache.cached_chunks' ``prepare``)."""
    if _continues_rows(loaded.adapter):
        with torch.no_grad():
            _clean_record(loaded, item)


def remember_items(lm, items: list[Item]) -> None:
    """Build each item's batch (item_batch) and let the engine record the clean item (remember_item), so that
    workers forked afterwards find both in memory."""
    for item in items:
        remember_item(lm, on_device(lm, item_batch(lm.processor, item).inputs))


def _clean_item(loaded, item: dict, start: int) -> tuple[dict, dict]:
    """What _from_prefix continues from: each attention module -> (key and value [1, Hkv, start, D] of the clean
    item's rows [0, start), its mask rows [1, 1, T - start, T]), and the text backbone's inputs of rows [start, T)
    (_later_inputs)."""
    layers, positions, embeddings = _clean_record(loaded, item)
    first_rows = {
        module: (k[:, :, :start], v[:, :, :start], mask[:, :, start:]) for module, (k, v, mask) in layers.items()
    }
    return first_rows, _later_inputs(positions, embeddings, start)


def _later_inputs(positions: torch.Tensor, embeddings: torch.Tensor, start: int) -> dict:
    """The text backbone's position ids [..., 1, T - start] and input embeddings [1, T - start, D] of the clean
    item's rows [start, T), as the whole item's forward gave them.

    A family may write vision features at positions that are not image tokens, and only when the pixels come with
    the forward: Ovis 2 gives its visual indicator tokens (around the image) rows of its visual embedding table. The
    copies' forward of rows [start, T) holds the pixels only when an image lies there, so it would embed such a
    token as text; the whole item's embeddings carry it. What the backbone derives from them (Gemma 4's per-layer
    inputs) follows; Qwen3-VL's deepstack features enter at image tokens only, which go with their pixels."""
    return {"position_ids": positions[..., start:], "inputs_embeds": embeddings[:, start:]}


def _clean_record(loaded, item: dict) -> tuple[dict, torch.Tensor, torch.Tensor]:
    """Each attention module -> (key, value [1, Hkv, T, D], mask [1, 1, T, T]) of the clean item, and the position
    ids [..., 1, T] and input embeddings [1, T, D] its text backbone got: one clean forward at batch 1, once per item
    while its tensors live (_Memo)."""
    model, adapter = loaded.model, loaded.adapter
    text_model = adapter.language_model(model)

    def record():
        seen = {}

        def note(module, args, kwargs):
            seen.update(position_ids=kwargs.get("position_ids"), inputs_embeds=kwargs.get("inputs_embeds"))

        hook = text_model.register_forward_pre_hook(note, with_kwargs=True)
        try:
            with attention.recording(adapter.attention_modules(model)) as calls, _vision_once(model):
                model(**item, use_cache=False, logits_to_keep=1)
                layers = dict(calls)
        finally:
            hook.remove()
        if seen["inputs_embeds"] is None:
            raise ValueError(
                f"{adapter.family}: its text backbone got no inputs_embeds, so run_head_sets cannot continue the "
                "clean item's rows with the embeddings the whole item gives the later ones"
            )
        length = item["input_ids"].shape[1]
        positions = seen["position_ids"]
        if positions is None:  # the backbone counts positions itself: from 0, as the item has no cache
            positions = torch.arange(length, device=item["input_ids"].device)[None]  # [1, T]
        return layers, positions, seen["inputs_embeds"]

    return _CLEAN.get_or_compute(model, list(item.values()), record)


class _Memo:
    """Per model, results of a computation on input tensors, kept while those tensors live and are unchanged
    (the same objects at the same versions) and the model's parameters are unchanged (their versions); the
    least recently used go first once the results hold more than MEMO_BYTES. Only without gradients."""

    def __init__(self):
        self.stores = weakref.WeakKeyDictionary()  # model -> OrderedDict: input ids -> (refs, versions, result, bytes)
        self.parameters = weakref.WeakKeyDictionary()  # model -> its parameters

    def get_or_compute(self, model, inputs: list, compute):
        tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
        if torch.is_grad_enabled() or any(t.is_inference() for t in tensors):
            return compute()
        key, versions = self._key(model, tensors)
        store = self.stores.setdefault(model, OrderedDict())
        if self._valid(store.get(key), tensors, versions):
            store.move_to_end(key)
            return store[key][2]
        result = compute()
        store[key] = ([weakref.ref(t) for t in tensors], versions, result, _nbytes(result))
        store.move_to_end(key)
        while len(store) > 1 and sum(entry[3] for entry in store.values()) > MEMO_BYTES:
            store.popitem(last=False)
        return result

    def holds(self, model, inputs: list) -> bool:
        """True when get_or_compute would return a kept result for these inputs."""
        tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
        if any(t.is_inference() for t in tensors):
            return False
        key, versions = self._key(model, tensors)
        return self._valid(self.stores.get(model, {}).get(key), tensors, versions)

    def _key(self, model, tensors: list) -> tuple[tuple, tuple]:
        """The inputs' identities, and the versions of them and of the model's parameters."""
        parameters = self.parameters.get(model)
        if parameters is None:
            parameters = self.parameters[model] = list(model.parameters())
        return tuple(id(t) for t in tensors), (*[t._version for t in tensors], sum(p._version for p in parameters))

    @staticmethod
    def _valid(entry, tensors: list, versions: tuple) -> bool:
        """The entry was kept for these very tensors, unchanged since, and for unchanged parameters."""
        return entry is not None and entry[1] == versions and all(r() is t for r, t in zip(entry[0], tensors))


def _nbytes(value) -> int:
    """Bytes held by the tensors in a (nested) result, each storage counted once."""
    storages, stack = {}, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            storages[item.untyped_storage().data_ptr()] = item.untyped_storage().nbytes()
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return sum(storages.values())


# What the memos keep per model. A notebook's runs meet each item again in every setting's run, and forked
# workers inherit what their parent remembered: the toy's 400 items hold ~40 MB of clean keys and values, a
# paper-shaped 8B model's item at 1,600 positions ~0.25 GB in bf16 (on its device).
MEMO_BYTES = 2**30
_VISION, _CLEAN, _ON_DEVICE = _Memo(), _Memo(), _Memo()
# model -> weak references to its modules that define get_image_features (the model itself among them in most
# families: a strong reference would keep every model ever run alive)
_VISION_OWNERS = weakref.WeakKeyDictionary()


def _uniform(value: float | torch.Tensor) -> bool:
    """One bias (or factor) for every copy: a float, or an [n] tensor of one value."""
    return not isinstance(value, torch.Tensor) or value.ndim == 0 or bool((value == value.flatten()[0]).all())


def _per_copy(name: str, selection: torch.Tensor, n: int, length: int, device) -> torch.Tensor:
    """A [1, T] or [n, T] selection of the item's T = ``length`` positions -> [n, T] on ``device`` (moved before it
    is expanded, so one [1, T] row stays one row for every copy: _one_for_all)."""
    if not isinstance(selection, torch.Tensor) or selection.ndim != 2 or selection.shape[0] not in (1, n):
        raise ValueError(
            f"{name} must be a bool tensor [1, {length}] or [{n}, {length}], got "
            f"{type(selection).__name__} {tuple(getattr(selection, 'shape', ()))}"
        )
    if selection.shape[1] != length:
        raise ValueError(
            f"{name} is {selection.shape[1]} positions wide, but the item has {length}: build it from this item's "
            "batch (e.g. batch.image_mask); a mask of another width would select positions off by the difference"
        )
    return selection.to(device).expand(n, -1)


def _check_sizes(logits_to_keep, max_tokens, length: int) -> None:
    """logits_to_keep: a whole number from 0 (every position) to the item's T; max_tokens: a whole number >= 1."""
    if not _whole(logits_to_keep) or not 0 <= logits_to_keep <= length:
        raise ValueError(
            f"logits_to_keep={logits_to_keep!r}: use a whole number from 0 (every position's logits) to the item's "
            f"{length} positions (k: the last k positions')"
        )
    if not _whole(max_tokens) or max_tokens < 1:
        raise ValueError(f"max_tokens={max_tokens!r}: use a whole number >= 1 (copies x positions per forward)")


def _whole(value) -> bool:
    """A whole number (a Python or numpy integer), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _floats(name: str, value, n: int) -> torch.Tensor:
    """A bias or factor as float32: one value for every copy, or [n], one per head-set; anything else refused."""
    try:
        floats = torch.as_tensor(value, dtype=torch.float32)
    except (TypeError, ValueError, RuntimeError):
        floats = None
    if floats is None or floats.ndim > 1 or (floats.ndim == 1 and floats.shape[0] != n):
        shape = tuple(floats.shape) if floats is not None else type(value).__name__
        raise ValueError(
            f"{name}={value!r} ({shape}): use a float{' or HIDE' if name == 'bias' else ''}, the same for every "
            f"head-set, or a tensor of {n} floats, one per head-set"
        )
    return floats


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
