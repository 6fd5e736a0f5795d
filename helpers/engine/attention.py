"""The head-level attention engine: read, mask and steer any set of attention heads.

One attention function, registered with transformers under the name ``ATTENTION`` (together with
the ``eager_mask`` mask factory, so an additive float mask is materialised on every step, prefill
and decode). It computes the normal attention output (sdpa; on the CPU in fp32 with at most SMALL_KEYS keys,
two matmuls around a softmax, see ``_small``) and, while a ``probe`` is active, also

- **reads**: for the chosen query rows only, recomputes ``softmax(q k^T * scaling + mask)`` in fp32
  and reduces it at once to the attention mass each head sends to named key groups;
- **intervenes**: adds a per-head bias to the logits of one key group at chosen query rows
  (``HIDE`` to mask the group, ``+beta`` to steer towards it) and writes the recomputed output back
  (on the matmul path: adds the bias to the logits before the softmax) only for the (batch row, head,
  query row) triples in the head-set, so every other head stays bit-identical to the clean path. Or it masks
  those triples by another masking (``Intervention.masking``, helpers.engine.masking: query zeroing, output
  zeroing, post-softmax rescaling, the leaky uniform attention), replacing their softmax weights (matmul path)
  or writing back their output recomputed in fp32 (sdpa path).

Shapes: B = batch, L = candidate layers (``adapter.candidate_layers``; every decoder layer for most
families, only the softmax-attention layers of Qwen3.5), H = query heads, T = sequence positions
(columns of ``input_ids``; with generate, prompt + generated), G = key groups, R = read rows.

Positions are absolute columns of the padded batch (left padding is fine: the mask hides pads).
Row and key selections are bool ``[B, T]`` tensors; columns beyond T count as not selected, so a
selection built on the prompt never touches generated tokens unless ``"all"`` is used for rows.

Usage (``lm`` is a ``helpers.engine.LoadedModel``)::

    read = Read(query_rows=last_row,                     # [B, T] bool, or "all"
                groups={"panel": panel_keys, "image": image_keys})  # name -> [B, T] bool
    with probe(lm, read=read) as rec:
        lm.model(**inputs)
    rec.mass                  # [B, L, H, G]  mean over each batch row's chosen rows
    rec.mass_per_row          # [B, L, H, R, G] (read.per_row=True), NaN-padded
    rec.row_positions         # [B, R] absolute positions of those rows, -1 padded

    steer = Intervention(heads=head_set,                 # [B, L, H] bool
                         keys=cell_keys,                 # [B, T] bool
                         bias=3.0,                       # float, [B] tensor, or HIDE
                         query_rows="all")               # [B, T] bool, or "all"
    with probe(lm, intervene=steer):
        logits = lm.model(**inputs).logits

    # one item x many head-sets in one forward (S and R random sets):
    batch = expand_item(inputs, n=len(sets))              # batch of n copies of a 1-item input
    heads = stack_head_sets(lm.adapter, sets)            # [n, L, H] from lists of (layer, head)
    # ... or faster, the same logits with the work all copies share done once (vision tower, layers
    # below the first intervened layer):
    logits = run_head_sets(lm, inputs, heads, keys=cell_keys[:1], bias=HIDE)   # [n, T, V]

``read`` and ``intervene`` can be combined (the read sees the intervened attention of earlier
layers and the clean attention of its own layer). Only what a row can see is touched: the bias goes
to the selected keys that the row's mask shows (HIDE never un-hides a masked key), and pad rows (which
see no key) are neither read nor intervened on. Guards: heads or layers out of range, empty key
groups or rows for a batch row that carries heads, a HIDE that leaves a row no key, keys or groups
that no chosen row can see (pads, beyond the sequence, in every chosen row's future), a missing float
mask, or an intervened layer that never ran raise ``ValueError``/``RuntimeError`` instead of doing nothing.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch.nn.functional import scaled_dot_product_attention
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, eager_mask

from helpers.engine import copy_ledger
from helpers.engine.masking import KEYED, WEIGHTS, WITHOUT_QK, check_masking
from helpers.storage import timers

ATTENTION = "head_probe"
HIDE = float("-inf")  # bias that hides keys: only keys the row can see, which then get no attention
READ_CHUNK_ELEMENTS = 2**26  # fp32 scores per read chunk (256 MiB), bounds the read's memory
SMALL_KEYS = 256  # up to this many keys, fp32 attention on the CPU runs as matmuls (_small)
BLOCKED_ROWS = 32  # the compiled layers' causal rows in blocks from this many rows, where their shapes are static
KEY_STEP = 16  # a row block's keys are a multiple of this (fp32 lanes of a 512-bit vector; causal_blocks)
_CAUSAL_ROWS_MEMO: dict = {}  # causal_rows' answer for the last mask it saw (_kept_for_mask)
PLAIN_KWARGS = {"sliding_window", "position_ids", "cache_position", "is_causal", "use_cache"}  # _small ignores them

QueryRows = torch.Tensor | str  # a [B, T] bool selection of query rows, or "all"


@dataclass
class Read:
    """What to read: attention mass from ``query_rows`` [B, T] (or "all") to each key group [B, T]."""

    query_rows: QueryRows
    groups: dict[str, torch.Tensor]
    per_row: bool = False


@dataclass
class Intervention:
    """Add ``bias`` to the logits of ``keys`` [B, T] for ``heads`` [B, L, H] at ``query_rows`` [B, T] or "all".

    ``bias``: a float (every batch row), a [B] tensor (one per batch row, e.g. a beta sweep), or HIDE.
    ``masking``: how the heads are masked instead (helpers.engine.masking.MASKINGS); "hide" (the default) adds
    ``bias``, every other masking masks and takes bias=HIDE. "rescale" multiplies the weights on ``keys`` by
    ``factor`` (a float or a [B] tensor, >= 0); "query_zero", "output_zero" and "leaky_uniform" act on every
    key, so their ``keys`` are not used (None is fine).
    """

    heads: torch.Tensor
    keys: torch.Tensor | None
    bias: float | torch.Tensor
    query_rows: QueryRows = "all"
    masking: str = "hide"
    factor: float | torch.Tensor = 0.0


@dataclass
class Recording:
    """What a probe saw; filled while the context is open, summarised when it closes."""

    group_names: list[str]
    mass: torch.Tensor | None = None  # [B, L, H, G]
    mass_per_row: torch.Tensor | None = None  # [B, L, H, R, G]
    row_positions: torch.Tensor | None = None  # [B, R]


@dataclass
class _State:
    layer_of: dict  # attention module -> candidate-layer index
    n_layers: int
    n_heads: int
    read: Read | None
    intervene: Intervention | None
    recording: Recording
    batch: int
    step_start: int = 0  # absolute position of the first token of the current forward step
    step_end: int = 0  # one past its last token: queries and keys of every layer end here
    reached: int = 0  # one past the last position any step ran
    decoded: bool = False  # a step continued a cache (generate's later steps)
    layer_calls: list = field(default_factory=list)  # [L] forwards seen per layer
    read_sum: dict = field(default_factory=dict)  # layer -> [B, H, G]
    read_count: dict = field(default_factory=dict)  # layer -> [B]
    read_rows: dict = field(default_factory=dict)  # layer -> list of ([B, H, r, G], [r], [B, r])
    rows_hit: torch.Tensor | None = None  # [B] bool: a chosen row (one that sees a key) ran in the batch row
    keys_seen: torch.Tensor | None = None  # [B] bool: a chosen row saw a selected key
    groups_seen: torch.Tensor | None = None  # [B, G] bool: a key of the read group is visible to some row
    shared_layers: int = 0  # candidate layers run once at batch 1 (run_head_sets)
    same_item: bool = False  # every batch row is a copy of one item with the same keys, rows and bias (run_head_sets)
    offset: int = 0  # absolute position of the first token a forward without a cache runs (run_head_sets)
    pairs: dict = field(default_factory=dict)  # layer -> _Pairs of the intervention's head-set there
    selections: dict = field(default_factory=dict)  # this forward step's _Selection and _ReadRows (_per_mask)
    copies: object | None = None  # a probe call's copies for an installed copy counter (not run_head_sets')
    carriers: torch.Tensor | None = None  # [B, L] bool on the CPU: the batch rows with a head at each layer


IN_GRAPH = "head_probe_in_graph"  # the keyword that carries in_graph_inputs through a compiled decoder layer
_ACTIVE: list[_State] = []  # open probes, outermost first; each sees only its own model's modules
# run_head_sets' continuation of a clean item's first rows (see recording and continuing below)
_RECORDING: dict = {}  # attention module -> (key, value, attention_mask) of its last call
_CONTINUING: dict = {}  # attention module -> (key [1, Hkv, p0, D], value, mask rows [1, 1, T - p0, T])


def head_probe_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """The registered attention function. With ``IN_GRAPH`` inputs (the compiled decoder layers pass them when the
    layer's work fits in_graph_inputs) the attention is traced into the layer's graph; otherwise the eager path."""
    dense = kwargs.pop(IN_GRAPH, None)
    if dense is not None and _plain(query, key, value, dropout, kwargs):
        return _in_graph(query, key, value, query.shape[-1] ** -0.5 if scaling is None else scaling, *dense), None
    return _eager_attention(module, query, key, value, attention_mask, dropout, scaling, **kwargs)


@torch.compiler.disable
def _eager_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """sdpa attention plus the active probe's read and intervention. query [B, H, q, D], key [B, Hkv, k, D]."""
    if module in _CONTINUING:  # rows [p0, T): the keys and values of the rows before them, their full mask rows
        first_key, first_value, mask_rows = _CONTINUING[module]
        attention_mask = mask_rows[:, :, -query.shape[2] :]  # [1, 1, q, T]: the rows this call runs
        key, value = _continued(first_key, first_value, key, value)
    elif module in _RECORDING:
        _RECORDING[module] = (key, value, attention_mask)
    states = [state for state in _ACTIVE if module in state.layer_of]
    if _small(query, key, value, attention_mask, dropout, kwargs):
        scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
        grouped = _scores(query, key)  # [B, Hkv, g, q, k]
        scores = grouped.view(query.shape[:2] + grouped.shape[-2:]).mul_(scaling).add_(attention_mask)  # [B, H, q, k]
        args = (query, key, value, attention_mask, scaling, scores)
        replaced = [_apply(state, module, None, *args) for state in states]
        weights = scores.softmax(-1)
        for index, changed, reweighted in filter(None, replaced):  # maskings other than hide: the pairs' weights
            flat = weights.view(-1, *weights.shape[2:])  # [B * H, q, k]
            flat[index] = torch.where(changed[..., None], reweighted(flat[index]), flat[index])
        return _weighted(weights.view(grouped.shape), value), None
    copies = any(state.same_item for state in states)
    if _is_plain_causal(attention_mask, first_copy=copies):  # the causal kernel skips the masked half
        output, _ = sdpa_attention_forward(
            module, query, key, value, None, dropout=dropout, scaling=scaling, **dict(kwargs, is_causal=True)
        )
    else:
        output, _ = sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )  # [B, q, H, D]
    for state in states:
        _apply(state, module, output, query, key, value, attention_mask, scaling)
    return output, None


def in_graph_inputs(module, hidden_states, attention_mask) -> tuple | None:
    """What ``module``'s attention needs to run inside its compiled decoder layer's graph (_in_graph), given the
    layer's input ``hidden_states`` [B, q, D] and ``attention_mask``: (mask [B or 1, 1, q, k], gate [B, H, 1, 1]
    bool, addend [U', 1, q, k], first key, first value [1, Hkv, p0, D]; None where a part is not needed). None
    where the eager path runs instead: a read, a masking other than "hide", two probes on one module, a clean
    record, another dtype or device than fp32 on the CPU, more than SMALL_KEYS keys. The probe's guards and
    bookkeeping for the layer run here, before its graph, as _apply runs them on the eager path."""
    if module in _RECORDING or hidden_states.device.type != "cpu" or hidden_states.dtype != torch.float32:
        return None
    if attention_mask is None or attention_mask.dtype != torch.float32:
        return None
    q_len = hidden_states.shape[1]
    first_key = first_value = None
    if module in _CONTINUING:  # rows [p0, T) continue the clean item's first rows
        first_key, first_value, mask_rows = _CONTINUING[module]
        attention_mask = mask_rows[:, :, -q_len:]  # [1, 1, q, T]
    if attention_mask.shape[-1] > SMALL_KEYS or attention_mask.shape[-2] != q_len:
        return None
    states = [state for state in _ACTIVE if module in state.layer_of]
    eager = [s for s in states if s.read is not None or s.intervene.masking != "hide"]
    if len(states) > 1 or eager:
        return None
    gate = addend = None
    if states:
        gate, addend = _in_graph_intervention(states[0], module, hidden_states.shape[0], attention_mask)
    return attention_mask, gate, addend, first_key, first_value


def _in_graph_intervention(state: _State, module, batch: int, attention_mask) -> tuple:
    """The intervention at ``module``'s layer as (gate [B, H, 1, 1]: the set's heads, addend [U', 1, q, k]: the
    bias at the hit keys), or (None, None) where the layer holds no pair or runs once for all copies."""
    layer = state.layer_of[module]
    state.layer_calls[layer] += 1
    if layer < state.shared_layers:  # run_head_sets: below every intervened layer, once for all copies
        return None, None
    _check_batch(state, batch)
    if state.carriers is None:
        state.carriers = state.intervene.heads.any(-1).cpu()  # [B, L]
    carries = state.carriers[:, layer]  # [B] the batch rows with a head here
    if not carries.any():
        return None, None
    q_len, k_len = attention_mask.shape[-2:]

    def positions():  # the absolute positions of the queries [q] and keys [k], as _apply finds them
        arange = torch.arange(max(q_len, k_len), device=attention_mask.device)
        return state.step_end - q_len + arange[:q_len], state.step_end - k_len + arange[:k_len]

    selection = _per_mask(state, "intervene", attention_mask, lambda: _selection(state, attention_mask, *positions()))
    # the selection holds one row serving every batch row (copies of one item) or every batch row
    if (selection.emptied_rows & carries).any():
        _found(state, layer, attention_mask, *positions())  # raises the guard's error
    state.rows_hit |= carries & selection.rows_hit
    state.keys_seen |= carries & selection.keys_seen
    return state.intervene.heads[:, layer, :, None, None], _addend(selection)[:, None]


def _in_graph(query, key, value, scaling, mask, gate, addend, first_key, first_value, blocked) -> torch.Tensor:
    """softmax(q k^T s + mask + the addend at the gated heads) v [B, q, H, D], traced into the compiled layer's
    graph: the eager small path's sums, with the logits in the grouped layout [B, Hkv, g, q, k] throughout (a
    [B, H, q, k] view between the two matmuls makes inductor copy the weights with per-element index arithmetic).
    query [B, H, q, D]; key and value [B, Hkv, k', D], after ``first_key`` and ``first_value`` [1, Hkv, p0, D] when
    the rows continue an item's first rows; mask [B or 1, 1, q, k]; gate [B, H, 1, 1]; addend [U', 1, q, k].
    ``blocked`` (a causal mask, see causal_rows): the rows in blocks, each over the keys up to its last row
    (causal_blocks), which skips most of the masked half of the logits. Each block's output goes straight to its
    rows of the [B, q, H, D] result, one copy rather than a concatenation and then a transpose."""
    if first_key is not None:
        key, value = _continued(first_key, first_value, key, value)
    q_len, k_len = query.shape[2], key.shape[2]
    outputs = []
    for rows, seen in causal_blocks(q_len, k_len) if blocked else [(slice(0, q_len), k_len)]:
        scores = _scores(query[:, :, rows], key[:, :, :seen]) * scaling + mask[:, :, None, rows, :seen]
        if gate is not None:  # [B, Hkv, g, r, k']
            scores = scores + torch.where(
                gate.reshape(scores.shape[:3] + (1, 1)), addend[:, :, None, rows, :seen], 0.0
            )
        outputs.append(_weighted_by_head(scores.softmax(-1), value[:, :, :seen]).transpose(1, 2))  # [B, r, H, D]
    return outputs[0].contiguous() if len(outputs) == 1 else torch.cat(outputs, 1)


def causal_blocks(q_len: int, k_len: int) -> list[tuple[slice, int]]:
    """The row blocks of a causal attention over ``k_len`` keys whose ``q_len`` rows are its last: (rows, keys the
    block holds). A block holds the next multiple of KEY_STEP keys past what its first row sees, and every row that
    sees no more than that (the last block all keys). Each softmax row then spans whole vectors but in the last
    block; a key past a row's own is masked, so holding it changes nothing."""
    offset = k_len - q_len  # row i sees keys 0 .. offset + i
    blocks, start = [], 0
    while start < q_len:
        seen = min(-(-(offset + start + 1) // KEY_STEP) * KEY_STEP, k_len)
        stop = min(q_len, seen - offset)
        blocks.append((slice(start, stop), seen))
        start = stop
    return blocks


def causal_rows(mask) -> bool:
    """Whether _in_graph may run the rows under ``mask`` [B or 1, 1, q, k] in causal blocks: at least
    BLOCKED_ROWS rows, every row sees a key and none sees a key after its own position (k - q + its index). A row
    that sees no key spreads its weight over every key its block holds, so it keeps its rows whole."""
    q_len, k_len = mask.shape[-2:]
    if q_len < BLOCKED_ROWS:
        return False

    def verdict():
        seen = mask > torch.finfo(mask.dtype).min / 2  # [B or 1, 1, q, k]
        later = torch.ones(q_len, k_len, dtype=torch.bool, device=mask.device).triu(k_len - q_len + 1)
        return bool(seen.any(-1).all()) and not seen[..., later].any()

    return _kept_for_mask(_CAUSAL_ROWS_MEMO, mask, None, verdict)


def _kept_for_mask(memo: dict, mask, detail, compute):
    """``compute()`` for ``mask`` and ``detail``, kept in ``memo`` for the last mask asked about: every layer of a
    forward gets the same mask (or the same view of it), known by its address, shape, strides and version. The memo
    holds the mask, so its memory cannot serve another tensor under the same identity."""
    identity = (mask.data_ptr(), mask.shape, mask.stride(), mask._version, detail)
    if memo.get("identity") != identity:
        memo.update(identity=identity, mask=mask, value=compute())
    return memo["value"]


def _continued(first_key, first_value, key, value) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys and values [B, Hkv, T, D]: the clean item's first rows [1, Hkv, p0, D], broadcast over the batch,
    followed by the call's own rows [B, Hkv, T - p0, D]."""
    batch = key.shape[0]
    return (
        torch.cat([first_key.expand(batch, -1, -1, -1), key], 2),
        torch.cat([first_value.expand(batch, -1, -1, -1), value], 2),
    )


def _plain(query, key, value, dropout, kwargs) -> bool:
    """Attention that is softmax(q k^T s + mask) v and nothing else: no dropout, soft-capping, sinks or position
    bias, values as wide as keys, whole groups of query heads per key head."""
    return (
        key.shape[-1] == value.shape[-1]
        and query.shape[1] % key.shape[1] == 0
        and not dropout
        and all(given is None or given is False or name in PLAIN_KWARGS for name, given in kwargs.items())
    )


def _small(query, key, value, attention_mask, dropout, kwargs) -> bool:
    """Attention as two batched matmuls around a softmax: on the CPU in fp32, for at most SMALL_KEYS keys and
    with nothing but an additive float mask (no dropout, soft-capping, sinks or position bias). There sdpa's
    CPU kernel spends more on its per-head blocks than on arithmetic; both compute softmax(q k^T s + mask) v."""
    return (
        query.device.type == "cpu"
        and query.dtype == torch.float32
        and key.shape[2] <= SMALL_KEYS
        and attention_mask is not None
        and attention_mask.dtype == query.dtype
        and tuple(attention_mask.shape[-2:]) == (query.shape[2], key.shape[2])
        and _plain(query, key, value, dropout, kwargs)
    )


def _scores(query, key) -> torch.Tensor:
    """q k^T [B, Hkv, g, q, k], query head i * g + j at [:, i, j]: each key head serves its group of query heads
    without being repeated."""
    batch, n_heads, q_len, dim = query.shape
    n_kv, k_len = key.shape[1], key.shape[2]
    group = n_heads // n_kv
    grouped = query.reshape(batch * n_kv, group * q_len, dim)  # [B * Hkv, g * q, D]
    scores = torch.bmm(grouped, key.reshape(batch * n_kv, k_len, dim).transpose(1, 2))  # [B * Hkv, g * q, k]
    return scores.view(batch, n_kv, group, q_len, k_len)


def _weighted(weights, value) -> torch.Tensor:
    """Attention weights [B, Hkv, g, q, k] times values [B, Hkv, k, D] -> output [B, q, H, D] (sdpa's layout)."""
    return _weighted_by_head(weights, value).transpose(1, 2).contiguous()


def _weighted_by_head(weights, value) -> torch.Tensor:
    """Attention weights [B, Hkv, g, q, k] times values [B, Hkv, k, D] -> output [B, H, q, D]."""
    batch, n_kv, group, q_len, k_len = weights.shape
    out = torch.bmm(weights.reshape(batch * n_kv, group * q_len, k_len), value.reshape(batch * n_kv, k_len, -1))
    return out.view(batch, n_kv * group, q_len, -1)


def _apply(state: _State, module, output, query, key, value, attention_mask, scaling, scores=None):
    """One probe's read and intervention at one attention call: the intervention changes ``output`` [B, q, H, D]
    in place, or, on the small path, the logits ``scores`` = q k^T s + mask [B, H, q, k] before their softmax
    ("hide"), or returns how to reweight the pairs after it (the other maskings, see _intervene)."""
    layer = state.layer_of[module]
    if layer < state.shared_layers:  # run_head_sets: below every intervened layer, once for all copies
        state.layer_calls[layer] += 1
        return None
    if attention_mask is None or attention_mask.dtype == torch.bool:
        raise RuntimeError(
            f"candidate layer {layer} got attention_mask={None if attention_mask is None else attention_mask.dtype}; "
            f"the probe needs the additive float mask that the '{ATTENTION}' mask function materialises. "
            "Load the model with helpers.engine.load_model (or attn_implementation set to it for the text backbone)."
        )
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    batch, n_heads, q_len, _ = query.shape
    k_len = key.shape[2]
    _check_batch(state, batch)
    # Queries and keys both end at the step's last token: sliding-window layers keep only the last keys,
    # and Gemma 4's KV-shared layers may run only the last queries (generate's logits_to_keep).
    query_pos = state.step_end - q_len + torch.arange(q_len, device=query.device)  # [q]
    key_pos = state.step_end - k_len + torch.arange(k_len, device=query.device)  # [k]
    groups_of_kv = n_heads // key.shape[1]
    state.layer_calls[layer] += 1
    if state.read is not None:
        _read(state, layer, query, key, attention_mask, scaling, groups_of_kv, query_pos, key_pos)
    if state.intervene is None:
        return None
    return _intervene(
        state, layer, output, query, key, value, attention_mask, scaling, groups_of_kv, query_pos, key_pos, scores
    )


def _check_batch(state: _State, batch: int) -> None:
    if batch != state.batch:
        raise ValueError(f"the probe's tensors have batch size {state.batch}, the forward has batch size {batch}")


def _is_plain_causal(attention_mask, first_copy: bool = False) -> bool:
    """True for a float mask [B, 1, T, T] that only hides the future (no padding, window or bidirectional block);
    ``first_copy``: the batch rows are copies of one item, so only the first is checked. Kept per mask."""
    if attention_mask is None or attention_mask.dtype == torch.bool:
        return False
    size = attention_mask.shape[-1]
    if size < 2 or attention_mask.shape[-2] != size:  # decode steps, cached prefill
        return False

    def verdict():
        checked = attention_mask[:1] if first_copy else attention_mask
        allowed = torch.ones(size, size, dtype=torch.bool, device=attention_mask.device).tril()  # [T, T]
        return bool(((checked == 0) == allowed).all())

    return _kept_for_mask(_CAUSAL_MEMO, attention_mask, first_copy, verdict)


_CAUSAL_MEMO: dict = {}  # _is_plain_causal's verdict for the last mask it checked (_kept_for_mask)


@contextmanager
def recording(modules):
    """Inside, each attention module of ``modules`` keeps the key, value and mask of its last call: yields the
    dict module -> (key [B, Hkv, T, D], value, attention_mask [B, 1, T, T])."""
    for module in modules:
        _RECORDING[module] = None
    try:
        yield _RECORDING
    finally:
        for module in modules:
            _RECORDING.pop(module, None)


@contextmanager
def continuing(first_rows: dict):
    """Inside, a forward of rows [p0, T) continues the rows before them: each attention module of ``first_rows``
    (module -> key and value [1, Hkv, p0, D] of rows [0, p0), mask rows [1, 1, T - p0, T] of the whole item)
    attends over the given keys and values followed by its own, under that mask (any window or image block
    included). Copies of one item continue one clean item: its keys and values broadcast over the batch."""
    _CONTINUING.update(first_rows)
    try:
        yield
    finally:
        for module in first_rows:
            _CONTINUING.pop(module, None)


AttentionInterface.register(ATTENTION, head_probe_attention)
AttentionMaskInterface.register(ATTENTION, eager_mask)


def _select(selection: QueryRows, positions: torch.Tensor, batch: int) -> torch.Tensor:
    """Bool [B, n]: which of the absolute ``positions`` [n] a [B, T] selection (or "all") picks."""
    if isinstance(selection, str):
        return torch.ones(batch, positions.numel(), dtype=torch.bool, device=positions.device)
    inside = positions < selection.shape[1]
    picked = torch.zeros(batch, positions.numel(), dtype=torch.bool, device=positions.device)
    picked[:, inside] = selection.to(positions.device)[:, positions[inside]]
    return picked


@dataclass
class _ReadRows:
    """What a read picks under one mask: the rows it reads and the key groups, as floats to sum over."""

    chosen: torch.Tensor  # [B, q] chosen rows that see a key (pad rows see none)
    row_index: torch.Tensor  # [r] rows some batch row reads
    groups: torch.Tensor  # [B, 1, k, G] float: the key groups


def _per_mask(state: _State, kind: str, attention_mask, make):
    """``make()``, kept for this forward step and mask: every full-attention layer of a step gets the same mask
    tensor, known here by its address, shape, strides and version (``state.selections`` is emptied at each step,
    so a later step's mask at a reused address is never taken for it)."""
    key = (kind, attention_mask.data_ptr(), attention_mask.shape, attention_mask.stride(), attention_mask._version)
    if key not in state.selections:
        state.selections[key] = make()
    return state.selections[key]


def _read_rows(state: _State, layer: int, attention_mask, query_pos, key_pos) -> _ReadRows:
    """The read's _ReadRows under ``attention_mask`` [B or 1, 1, q, k], with the checks that every chosen row ran
    and which key groups some row can see (once per step and mask: _per_mask)."""
    batch = state.batch
    _check_rows_present(state, layer, query_pos, batch)
    visible = attention_mask[:, 0].expand(batch, -1, -1) > torch.finfo(attention_mask.dtype).min / 2  # [B, q, k]
    chosen = _select(state.read.query_rows, query_pos, batch) & visible.any(-1)  # [B, q]
    groups = torch.stack([_select(g, key_pos, batch) for g in state.read.groups.values()], -1)  # [B, k, G]
    state.groups_seen |= (groups & visible.any(1)[:, :, None]).any(1).cpu()  # [B, G]
    return _ReadRows(chosen, chosen.any(0).nonzero().flatten(), groups.float()[:, None])


def _read(state, layer, query, key, attention_mask, scaling, groups_of_kv, query_pos, key_pos):
    """Add this layer's attention mass from the read rows to each key group to the probe's sums: the rows' softmax
    recomputed in fp32 from their queries and the keys, as the clean attention of this layer."""
    picked = _per_mask(
        state, "read", attention_mask, lambda: _read_rows(state, layer, attention_mask, query_pos, key_pos)
    )
    if picked.row_index.numel() == 0:
        return
    batch, n_heads, _, head_dim = query.shape
    n_kv, k_len = key.shape[1], key.shape[2]
    mask = attention_mask.expand(batch, n_heads, -1, -1)  # [B, H, q, k] (a view)
    keys_t = key.float().transpose(-1, -2)[:, :, None]  # [B, Hkv, 1, D, k]
    chunk = max(1, READ_CHUNK_ELEMENTS // (batch * n_heads * k_len))
    for start in range(0, picked.row_index.numel(), chunk):
        index = picked.row_index[start : start + chunk]  # [r]
        q_rows = query[:, :, index].float().view(batch, n_kv, groups_of_kv, index.numel(), head_dim)
        scores = (q_rows @ keys_t).view(batch, n_heads, index.numel(), k_len)  # [B, H, r, k]
        scores = scores * scaling + mask[:, :, index].float()
        mass = scores.softmax(-1) @ picked.groups  # [B, H, r, G]
        weight = picked.chosen[:, index]  # [B, r]
        summed = (mass * weight[:, None, :, None]).sum(2)  # [B, H, G]
        state.read_sum[layer] = state.read_sum.get(layer, 0) + summed
        state.read_count[layer] = state.read_count.get(layer, 0) + weight.sum(1)
        if state.read.per_row:
            state.read_rows.setdefault(layer, []).append((mass, query_pos[index], weight))


def _check_rows_present(state, layer, query_pos, batch) -> None:
    """A read row of this step that a layer did not run (its queries were sliced away) would be missed."""
    step = torch.arange(state.step_start, state.step_end, device=query_pos.device)  # [n]
    chosen = _select(state.read.query_rows, step, batch).sum()
    present = _select(state.read.query_rows, query_pos, batch).sum()
    if present != chosen:
        raise RuntimeError(
            f"candidate layer {layer} ran only the last {query_pos.numel()} of the step's {step.numel()} rows, "
            f"so {int(chosen - present)} chosen read rows are missing there; run the forward with logits_to_keep=0"
        )


@dataclass
class _Pairs:
    """The (batch row, head) pairs of an intervention's head-set at one layer, sorted by batch row."""

    b: torch.Tensor  # [N] batch rows
    h: torch.Tensor  # [N] heads
    carriers: torch.Tensor  # [U] the batch rows with a head here
    pair_row: torch.Tensor  # [N] each pair's index into carriers
    carriers_cpu: torch.Tensor  # [U]


@dataclass
class _Selection:
    """What an intervention's rows, keys and bias pick under one mask, for the batch rows it is made for: the
    first when the batch rows are copies of one item (``_State.same_item``), else every batch row (U' of them)."""

    rows_mask: torch.Tensor  # [U', q, k] the mask (a view)
    gate: torch.Tensor  # [U', q] chosen rows that see a key
    changed: torch.Tensor  # [U', q] the rows it changes: gate, for a keyed masking only where a row sees a hit key
    hit: torch.Tensor  # [U', q, k] selected keys a chosen row sees
    bias: torch.Tensor  # [U']
    rows_hit: torch.Tensor  # [U'] bool on the CPU: some chosen row sees a key
    keys_seen: torch.Tensor  # [U'] bool on the CPU: some chosen row sees a selected key
    emptied: torch.Tensor  # [U', q] chosen rows that HIDE leaves without a key
    emptied_rows: torch.Tensor  # [U'] bool on the CPU
    factor: torch.Tensor  # [U'] rescale's factor
    addend: torch.Tensor | None = None  # [U', q, k] the small path's addition to the logits (_addend)


def _pairs(state: _State, layer: int, device) -> _Pairs:
    """The head-set's pairs at ``layer``, found once per probe."""
    if layer not in state.pairs:
        pairs = state.intervene.heads[:, layer].nonzero().cpu()  # [N, 2]
        carriers, pair_row = pairs[:, 0].unique(return_inverse=True)
        b, h = pairs[:, 0].to(device), pairs[:, 1].to(device)
        state.pairs[layer] = _Pairs(b, h, carriers.to(device), pair_row.to(device), carriers)
    return state.pairs[layer]


def _selection(state: _State, attention_mask, query_pos, key_pos) -> _Selection:
    """The intervention's _Selection under ``attention_mask`` [B or 1, 1, q, k] (once per step and mask: _per_mask)."""
    spec, batch = state.intervene, state.batch
    own = slice(0, 1) if state.same_item else slice(None)
    rows_mask = attention_mask[:, 0].expand(batch, -1, -1)[own]  # [U', q, k]
    seen = rows_mask > torch.finfo(attention_mask.dtype).min / 2  # keys each row can see
    gate = _select(spec.query_rows, query_pos, batch)[own] & seen.any(-1)  # [U', q]
    if spec.masking in KEYED:
        hit = _select(spec.keys, key_pos, batch)[own][:, None, :] & seen & gate[..., None]  # [U', q, k]
    else:  # the masking acts on every key
        hit = torch.zeros_like(seen)
    bias = spec.bias_per_row.to(attention_mask.device)[own]  # [U']
    hides = (bias == HIDE) & (spec.masking == "hide")  # [U'] (rescale by 0 leaves a row weights summing to 0)
    changed = gate & hit.any(-1) if spec.masking in KEYED else gate  # [U', q]
    emptied = gate & ~(seen & ~(hit & hides[:, None, None])).any(-1)  # [U', q]
    return _Selection(
        rows_mask=rows_mask,
        gate=gate,
        changed=changed,
        hit=hit,
        bias=bias,
        rows_hit=gate.any(1).cpu(),
        keys_seen=hit.flatten(1).any(1).cpu(),
        emptied=emptied,
        emptied_rows=emptied.any(1).cpu(),
        factor=spec.factor_per_row.to(attention_mask.device)[own],
    )


def _addend(selection: _Selection) -> torch.Tensor:
    """[U', q, k]: the bias (HIDE as the dtype's lowest value) at the hit keys, 0 elsewhere. Added to logits that
    already hold the mask it equals the logits under the biased mask, clamp(mask + bias), bit for bit, because
    a key a row sees has mask 0 (the float masks of ``eager_mask``: 0 or the lowest value)."""
    if selection.addend is None:
        if bool((selection.rows_mask[selection.hit] != 0).any()):
            raise RuntimeError(
                "the attention mask holds values other than 0 at keys a row sees; the small attention path adds "
                "the intervention's bias to the logits and needs the 0 / lowest-value masks of eager_mask"
            )
        dtype = selection.rows_mask.dtype
        bias = selection.bias.to(dtype).clamp(min=torch.finfo(dtype).min)[:, None, None]  # [U', 1, 1]
        selection.addend = torch.where(selection.hit, bias, torch.zeros((), dtype=dtype))
    return selection.addend


def _found(state: _State, layer: int, attention_mask, query_pos, key_pos) -> tuple[_Pairs, _Selection] | None:
    """The head-set's pairs at ``layer`` and what the intervention picks under ``attention_mask`` [B or 1, 1, q, k]
    (None where the layer holds no pair), after the guard against a row left without a key; notes which batch
    rows had a chosen row and saw a selected key."""
    pairs = _pairs(state, layer, attention_mask.device)
    if pairs.b.numel() == 0:
        return None
    selection = _per_mask(
        state, "intervene", attention_mask, lambda: _selection(state, attention_mask, query_pos, key_pos)
    )
    n_carriers = pairs.carriers.numel()
    # the selection has one row serving every carrier (copies of one item) or every batch row
    own, own_cpu = (slice(0, 1), slice(0, 1)) if state.same_item else (pairs.carriers, pairs.carriers_cpu)
    if selection.emptied_rows[own_cpu].any():
        row_of, row = selection.emptied[own].nonzero()[0].tolist()
        batch_row = int(pairs.carriers_cpu[row_of])
        raise ValueError(
            f"the intervention hides every key that query row {int(query_pos[row])} of batch row {batch_row} can "
            f"see (candidate layer {layer}, head {int(pairs.h[pairs.b == batch_row][0])}): its attention would be "
            "undefined; hide fewer keys or leave that row out of Intervention.query_rows"
        )
    state.rows_hit[pairs.carriers_cpu[selection.rows_hit[own_cpu].expand(n_carriers)]] = True
    state.keys_seen[pairs.carriers_cpu[selection.keys_seen[own_cpu].expand(n_carriers)]] = True
    return pairs, selection


def _intervene(
    state, layer, output, query, key, value, attention_mask, scaling, groups_of_kv, query_pos, key_pos, scores
):
    """Recompute the attention of the set's (batch row, head) pairs with the bias and write it into ``output``
    [B, q, H, D], or (the small path) add the bias to the pairs' logits ``scores`` [B, H, q, k] before their
    softmax. Under another masking the pairs' output is recomputed from its weights (_recomputed), or (the small
    path) returned: (index [N] into scores viewed [B * H, q, k], the rows it changes [N, q], a function of their
    softmax weights [N, q, k] giving their new weights), which replace theirs at those rows after the softmax.

    Rows, keys, bias and mask belong to a batch row, not to a head: what they pick is found once per forward
    step (_selection), for one batch row when the batch rows are copies of one item, and shared by the heads."""
    found = _found(state, layer, attention_mask, query_pos, key_pos)
    if found is None:
        return None
    pairs, selection = found
    n_carriers = pairs.carriers.numel()
    own = slice(0, 1) if state.same_item else pairs.carriers  # the selection's one row serves every carrier
    n_heads, q_len, k_len = query.shape[1], query.shape[2], key.shape[2]
    masking = state.intervene.masking
    if scores is not None:
        index = pairs.b * n_heads + pairs.h  # [N] the pairs in scores viewed [B * H, q, k]

        def per_pair(selected):  # [U', ...] -> [N, ...]
            return selected.expand(index.numel(), *selected.shape[1:]) if state.same_item else selected[pairs.b]

        if masking == "hide":  # the pairs' logits plus the bias at their hit keys
            scores.view(-1, q_len, k_len).index_add_(0, index, per_pair(_addend(selection)))
            return None
        mask, hit, factor = (per_pair(t) for t in (selection.rows_mask, selection.hit, selection.factor))
        return index, per_pair(selection.changed), lambda weights: WEIGHTS[masking](weights, mask, hit, factor)
    gate = selection.changed[own]  # [U', q]
    row_index = gate.any(0).nonzero().flatten()  # [r]
    if row_index.numel() == 0:
        return None
    all_rows = row_index.numel() == q_len
    gate = gate if all_rows else gate[:, row_index]  # [U', r]
    hit = selection.hit[own] if all_rows else selection.hit[own][:, row_index]  # [U', r, k]
    masked = selection.rows_mask[own] if all_rows else selection.rows_mask[own][:, row_index]  # [U', r, k]
    pair_gate = gate.expand(n_carriers, -1)[pairs.pair_row]  # [N, r]
    b, h = pairs.b, pairs.h
    q_sel = query[b, h] if all_rows else query[b, h][:, row_index]  # [N, r, D]
    k_sel, v_sel = key[b, h // groups_of_kv], value[b, h // groups_of_kv]  # [N, k, D]
    if masking == "hide":
        lowest = torch.finfo(masked.dtype).min
        bias = selection.bias[own][:, None, None].to(masked.dtype)
        biased_mask = torch.where(hit, (masked + bias).clamp(min=lowest), masked)  # [U', r, k]
        steered = _attend(q_sel, k_sel, v_sel, biased_mask, pairs.pair_row, n_carriers, scaling)  # [N, r, D]
    else:
        factor = selection.factor[own]  # [U']
        steered = _recomputed(masking, q_sel, k_sel, v_sel, masked, hit, factor, pairs.pair_row, scaling)
    where = (b[:, None], row_index[None, :], h[:, None])  # output is [B, q, H, D]
    output[where] = torch.where(pair_gate[..., None], steered.to(output.dtype), output[where])


def _recomputed(masking: str, q_sel, k_sel, v_sel, row_mask, hit, factor, pair_row, scaling) -> torch.Tensor:
    """The pairs' attention output [N, r, D] under a masking other than "hide": their new weights
    (helpers.engine.masking) times their values, in fp32, in chunks of rows that keep the weights within
    READ_CHUNK_ELEMENTS. ``row_mask`` and ``hit`` [U, r, k] and ``factor`` [U] belong to the batch rows
    (pair_row: [N] -> U)."""
    n_pairs, r, _ = q_sel.shape
    out = torch.zeros(n_pairs, r, v_sel.shape[-1], device=v_sel.device)
    if masking == "output_zero":  # weights 0: no product to compute
        return out
    n_rows, k_len = row_mask.shape[0], k_sel.shape[1]
    keys_t, values = k_sel.float().transpose(1, 2), v_sel.float()  # [N, D, k], [N, k, D]
    factor = factor.expand(n_rows)[pair_row]  # [N]
    step = max(1, READ_CHUNK_ELEMENTS // (n_pairs * k_len))
    for start in range(0, r, step):
        part = slice(start, start + step)
        mask = row_mask[:, part].expand(n_rows, -1, -1)[pair_row].float()  # [N, c, k]
        hit_rows = hit[:, part].expand(n_rows, -1, -1)[pair_row]  # [N, c, k]
        weights = None if masking in WITHOUT_QK else ((q_sel[:, part].float() @ keys_t) * scaling + mask).softmax(-1)
        out[:, part] = WEIGHTS[masking](weights, mask, hit_rows, factor) @ values
    return out


def _attend(q_sel, k_sel, v_sel, row_mask, pair_row, n_rows: int, scaling) -> torch.Tensor:
    """sdpa of each pair [N, r|k, D] under its batch row's mask row_mask [U, r, k] or, shared by every batch
    row, [1, r, k] (pair_row: [N] -> U)."""
    n_pairs, r, d = q_sel.shape
    if n_pairs % n_rows == 0 and (pair_row.view(n_rows, -1) == pair_row.view(n_rows, -1)[:, :1]).all():
        heads = n_pairs // n_rows  # every batch row carries `heads` pairs, consecutively
        grouped = [t.reshape(n_rows, heads, -1, d) for t in (q_sel, k_sel, v_sel)]  # [U, heads, r|k, D]
        out = scaled_dot_product_attention(*grouped, attn_mask=row_mask[:, None], scale=scaling)
        return out.reshape(n_pairs, r, d)
    return scaled_dot_product_attention(
        q_sel[None], k_sel[None], v_sel[None], attn_mask=row_mask.expand(n_rows, -1, -1)[pair_row][None], scale=scaling
    )[0]


def _check_selection(name: str, selection, batch: int, need_rows: torch.Tensor) -> None:
    """A [B, T] bool selection (or "all" for query rows) must pick something in every batch row that needs it."""
    if isinstance(selection, str):
        if selection != "all":
            raise ValueError(f"{name}={selection!r}: use a [batch, positions] bool tensor or 'all'")
        return
    if not isinstance(selection, torch.Tensor) or selection.dtype != torch.bool or selection.ndim != 2:
        raise ValueError(
            f"{name} must be a bool tensor [batch, positions] (got {type(selection).__name__} "
            f"{getattr(selection, 'dtype', '')} {tuple(getattr(selection, 'shape', ()))})"
        )
    if selection.shape[0] != batch:
        raise ValueError(f"{name} has batch size {selection.shape[0]}, expected {batch}")
    empty = (~selection.any(1) & need_rows.to(selection.device)).nonzero().flatten().tolist()
    if empty:
        raise ValueError(f"{name} selects no position in batch row(s) {empty}")


def prepare_intervention(spec: Intervention, n_layers: int, n_heads: int) -> torch.Tensor:
    """Validate ``spec``, attach its per-row bias and factor [B]; return which batch rows carry heads [B]."""
    check_masking(spec.masking)
    heads = spec.heads
    if not isinstance(heads, torch.Tensor) or heads.dtype != torch.bool or heads.ndim != 3:
        raise ValueError(
            "Intervention.heads must be a bool tensor [batch, layers, heads]; "
            "build one with heads_to_mask or stack_head_sets"
        )
    if tuple(heads.shape[1:]) != (n_layers, n_heads):
        raise ValueError(
            f"Intervention.heads has shape {tuple(heads.shape)}; this model needs "
            f"[batch, {n_layers} candidate layers, {n_heads} heads]"
        )
    batch = heads.shape[0]
    carries = heads.flatten(1).any(1).cpu()  # [B], on the CPU beside the probe's flags (rows_hit, keys_seen)
    if spec.masking in KEYED:
        _check_selection("Intervention.keys", spec.keys, batch, carries)
        if isinstance(spec.keys, str):
            raise ValueError("Intervention.keys must be a bool tensor [batch, positions], not a string")
    _check_selection("Intervention.query_rows", spec.query_rows, batch, carries)
    bias = _per_row(spec.bias, batch)
    if bias is None or torch.isnan(bias).any() or (bias == float("inf")).any():
        raise ValueError(
            f"Intervention.bias must be a float, HIDE or a [{batch}] tensor without NaN/+inf; got {spec.bias!r}"
        )
    if spec.masking != "hide" and (bias != HIDE).any():
        raise ValueError(
            f"masking {spec.masking!r} masks without a bias: pass bias=HIDE (a bias steers only with masking 'hide')"
        )
    factor = _per_row(spec.factor, batch)
    if factor is None or not torch.isfinite(factor).all() or (factor < 0).any():
        raise ValueError(
            f"Intervention.factor must be a float or a [{batch}] tensor, finite and >= 0; got {spec.factor!r}"
        )
    spec.bias_per_row, spec.factor_per_row = bias, factor
    return carries


def _per_row(value, batch: int) -> torch.Tensor | None:
    """A float or a [B] tensor -> float32 [B]; None for any other shape."""
    value = torch.as_tensor(value, dtype=torch.float32)
    value = value.expand(batch) if value.ndim == 0 else value
    return value if tuple(value.shape) == (batch,) else None


def _check_read(spec: Read) -> int:
    if not spec.groups:
        raise ValueError("Read.groups is empty: name at least one key group, e.g. {'image': image_keys}")
    sizes = {g.shape[0] for g in spec.groups.values() if isinstance(g, torch.Tensor)}
    if not isinstance(spec.query_rows, str):
        sizes.add(spec.query_rows.shape[0] if isinstance(spec.query_rows, torch.Tensor) else -1)
    if len(sizes) != 1:
        raise ValueError(f"Read query_rows and groups disagree on the batch size: {sorted(sizes)}")
    batch = sizes.pop()
    everyone = torch.ones(batch, dtype=torch.bool)
    for name, group in spec.groups.items():
        if isinstance(group, str):
            raise ValueError(f"key group {name!r} must be a bool tensor [batch, positions]")
        _check_selection(f"key group {name!r}", group, batch, everyone)
    _check_selection("Read.query_rows", spec.query_rows, batch, everyone)
    return batch


@contextmanager
def probe(loaded, read: Read | None = None, intervene: Intervention | None = None):
    """Activate a read and/or an intervention for every forward (and generate step) run inside.

    ``loaded``: a helpers.engine.LoadedModel. Yields a Recording, complete once the block exits.
    """
    counter = copy_ledger.active_counter()  # a run's copy ledger, if one is installed or open
    copies = counter.probe_copies(loaded, read, intervene) if counter is not None else None
    with probe_state(loaded, read, intervene, copies=copies) as state:
        with timers.timed("forward"):
            yield state.recording


@contextmanager
def probe_state(
    loaded,
    read: Read | None,
    intervene: Intervention | None,
    shared_layers: int = 0,
    same_item: bool = False,
    offset: int = 0,
    copies: object | None = None,
):
    """probe's body, yielding the probe's state (run_head_sets opens it with its options). ``shared_layers``,
    ``same_item`` and ``offset``: see run_head_sets; ``copies``: what an installed copy counter counts
    (run_head_sets counts its own)."""
    if read is None and intervene is None:
        raise ValueError("probe needs read=..., intervene=... or both")
    if not isinstance(read, Read | None) or not isinstance(intervene, Intervention | None):
        raise TypeError(
            f"probe takes read=Read(...) and intervene=Intervention(...), got {type(read).__name__} and "
            f"{type(intervene).__name__}"
        )
    adapter, model = loaded.adapter, loaded.model
    n_layers, n_heads = len(adapter.candidate_layers), adapter.n_heads
    modules = adapter.attention_modules(model)
    for module in modules:
        if module.config._attn_implementation != ATTENTION:
            raise RuntimeError(
                f"the text backbone runs attention '{module.config._attn_implementation}', "
                f"not '{ATTENTION}': load the model with helpers.engine.load_model"
            )
    batches = set()
    carries = None
    if read is not None:
        batches.add(_check_read(read))
    if intervene is not None:
        carries = prepare_intervention(intervene, n_layers, n_heads)
        batches.add(carries.numel())
    if len(batches) != 1:
        raise ValueError(f"read and intervention disagree on the batch size: {sorted(batches)}")
    batch = batches.pop()
    recording = Recording(group_names=list(read.groups) if read is not None else [])
    state = _State(
        layer_of={module: i for i, module in enumerate(modules)},
        n_layers=n_layers,
        n_heads=n_heads,
        read=read,
        intervene=intervene,
        recording=recording,
        batch=batch,
        layer_calls=[0] * n_layers,
        rows_hit=torch.zeros(batch, dtype=torch.bool),
        keys_seen=torch.zeros(batch, dtype=torch.bool),
        groups_seen=torch.zeros(batch, len(recording.group_names), dtype=torch.bool),
        shared_layers=shared_layers,
        same_item=same_item,
        offset=offset,
        copies=copies,
    )
    hook = adapter.language_model(model).register_forward_pre_hook(
        lambda module, args, kwargs: _note_step(state, args, kwargs), with_kwargs=True
    )
    _ACTIVE.append(state)
    try:
        yield state
    finally:
        _ACTIVE.remove(state)
        hook.remove()
    if state.reached:  # a probe whose forward never ran is refused by _check_ran
        _check_widths(state, 0, state.reached + state.decoded)
    _check_ran(state, carries)
    if read is not None:
        _summarise_read(state, batch)
    if copies is not None:
        copies.close()


def _note_step(state: _State, args: tuple, kwargs: dict):
    """Pre-hook of the text backbone: the absolute positions of this forward step's tokens. A read also
    turns off ``logits_to_keep`` there (Gemma 4 would run only the last rows through its KV-shared layers;
    the model still slices its logits itself)."""
    cache = kwargs.get("cache", kwargs.get("past_key_values"))
    tokens = kwargs.get("inputs_embeds")
    if tokens is None:
        tokens = kwargs["input_ids"] if kwargs.get("input_ids") is not None else args[0]
    state.step_start = cache.get_seq_length() if cache is not None else state.offset
    state.step_end = state.step_start + tokens.shape[1]
    state.selections = {}  # this step's masks are new tensors
    if state.step_start == state.offset:  # a forward from the sequence's start; with a cache, generate's first step
        _check_widths(state, state.step_end, None if cache is not None else state.step_end)
    state.reached = max(state.reached, state.step_end)
    state.decoded |= state.step_start > state.offset
    if state.copies is not None and tokens.shape[0] == state.batch:  # another batch: the attention layers refuse it
        state.copies.step(tokens, state.step_start, state.step_end)
    if state.read is not None and kwargs.get("logits_to_keep"):
        return args, dict(kwargs, logits_to_keep=0)
    return None


def _check_widths(state: _State, shortest: int, longest: int | None) -> None:
    """Every [B, T] selection is from ``shortest`` to ``longest`` (None: any) positions wide: at a forward from the
    sequence's start, as wide as its T positions, or wider when it fills a cache (generate's later steps run past
    T); when the probe closes, no wider than the positions that ran, and one more after generate's steps (its last
    token never runs). A mask of another width would select positions off by the difference."""
    named = []
    if state.read is not None:
        named += [
            ("Read.query_rows", state.read.query_rows),
            *((f"key group {g!r}", m) for g, m in state.read.groups.items()),
        ]
    if state.intervene is not None:
        named += [("Intervention.query_rows", state.intervene.query_rows)]
        named += [("Intervention.keys", state.intervene.keys)] if state.intervene.masking in KEYED else []
    for name, selection in named:
        if not isinstance(selection, torch.Tensor):
            continue
        width = selection.shape[1]
        if width < shortest or (longest is not None and width > longest):
            ran = f"the input holds {shortest}" if shortest else f"the forward steps ran {state.reached}"
            raise ValueError(
                f"{name} is {width} positions wide, but {ran} positions: build it from the same input (wider only "
                "by generate's new tokens); a mask of another width would select positions off by the difference"
            )


def _check_ran(state: _State, carries: torch.Tensor | None) -> None:
    never = [layer for layer, calls in enumerate(state.layer_calls) if calls == 0]
    if state.intervene is not None:
        used = state.intervene.heads.any(0).any(-1).nonzero().flatten().tolist()  # layers with heads
        missed = sorted(set(used) & set(never))
        if missed:
            raise RuntimeError(
                f"the intervention's layers {missed} never ran inside the probe: nothing was changed there"
            )
        unreached = (carries & ~state.rows_hit).nonzero().flatten().tolist()
        if unreached:
            raise RuntimeError(
                f"the intervention's rows never occurred in batch row(s) {unreached} (rows beyond the sequence "
                "and pad rows, which see no key, do not count): nothing was changed"
            )
        unseen = (carries & ~state.keys_seen).nonzero().flatten().tolist()
        if unseen and state.intervene.masking in KEYED:
            raise ValueError(
                f"Intervention.keys: no chosen row of batch row(s) {unseen} can see any selected key (the keys "
                "are pads, beyond the sequence, or after every chosen row): nothing was changed"
            )
    if state.read is not None and never:
        raise RuntimeError(f"candidate layers {never} never ran inside the probe: the read is incomplete")


def _summarise_read(state: _State, batch: int) -> None:
    rec = state.recording
    counts = torch.stack([torch.as_tensor(state.read_count.get(l, torch.zeros(batch))) for l in range(state.n_layers)])
    if (counts == 0).any():
        missing = (counts == 0).any(0).nonzero().flatten().tolist()
        raise RuntimeError(
            f"no chosen read row occurred in batch row(s) {missing} (rows beyond the sequence and pad rows, "
            "which see no key, do not count): the read is empty"
        )
    for g, name in enumerate(rec.group_names):
        blind = (~state.groups_seen[:, g]).nonzero().flatten().tolist()
        if blind:
            raise ValueError(
                f"key group {name!r} holds no key that any row of batch row(s) {blind} can see (only pads or "
                "positions beyond the sequence): its mass would be 0 by construction"
            )
    sums = torch.stack([state.read_sum[l] for l in range(state.n_layers)], 1)  # [B, L, H, G]
    rec.mass = sums / counts.T[:, :, None, None]
    if state.read.per_row:
        rec.mass_per_row, rec.row_positions = _stack_rows(state, batch)


def _stack_rows(state: _State, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row masses [B, L, H, R, G] (NaN-padded) and their positions [B, R] (-1 padded)."""
    per_layer = []
    for layer in range(state.n_layers):
        chunks = state.read_rows[layer]
        mass = torch.cat([m for m, _, _ in chunks], 2)  # [B, H, r_all, G]
        positions = torch.cat([p for _, p, _ in chunks])  # [r_all]
        weight = torch.cat([w for _, _, w in chunks], 1)  # [B, r_all]
        per_layer.append(mass)
    n_rows = int(weight.sum(1).max())
    n_groups = mass.shape[-1]
    out = torch.full((batch, state.n_layers, state.n_heads, n_rows, n_groups), float("nan"))
    row_positions = torch.full((batch, n_rows), -1, dtype=torch.long)
    stacked = torch.stack(per_layer, 1)  # [B, L, H, r_all, G]
    for b in range(batch):
        keep = weight[b].nonzero().flatten()
        out[b, :, :, : keep.numel()] = stacked[b, :, :, keep].cpu()
        row_positions[b, : keep.numel()] = positions[keep].cpu()
    return out, row_positions
