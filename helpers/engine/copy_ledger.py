"""What run_head_sets computes, for the copy ledger (helpers.storage.ledger): each copy's identity and matmul FLOPs.

A *copy* is one item's forward under one intervention: the logits run_head_sets returns for batch row i, decided
by (model, item, head-set, masking, row group, keys) and the bias, factor and logits kept that go with them. Its
digest (8 bytes) hashes exactly those: the model's fingerprint, dtype and device kind, the item's input tensors,
row i of the heads [L, H], keys [T] and rows [T] (or "all"), bias[i], factor[i], the masking and logits_to_keep. Two
copies with one digest give the same logits, whichever notebook or computation asked for them.

A copy's FLOPs are the matmuls of the work run_head_sets does for it: the decoder layers from the first one the copies
differ at (d0) at the rows after the unchanged prefix (p0), attending over every key, and the output head at the
kept rows; the layers below d0, run once per forward at batch 1, are shared among the forward's copies. The vision
tower (once per item, remembered) is not counted.

A ``probe`` call (a read, or an intervention outside run_head_sets, around any forward or generate) counts one copy
per batch row (ProbeCopies): its digest hashes the model's identity, the row's text-backbone input at the first
forward step (a float64 fingerprint of its embeddings, image features included, so two images behind the same
prompt differ), the step's first position and the row's share of the read and the intervention; its FLOPs are
every decoder layer's matmuls at every step's rows and the output head at those rows.
"""

import hashlib
import time
import weakref
from contextlib import contextmanager

import numpy as np
import torch

from helpers.engine import copy_hook
from helpers.engine.model_files import model_fingerprint
from helpers.storage import ledger, timers

DECIDES_RESULTS = False  # counts what is computed, never changes it (helpers.storage.code_hash)
_MODELS = weakref.WeakKeyDictionary()  # model -> (its identity bytes, its text backbone's shape)


@contextmanager
def counted(loaded, item: dict, spec, start: int, logits_to_keep: int, per_forward: int):
    """Around run_head_sets' forwards: the copies of `spec` (an Intervention of n copies of one-item `item`) go
    into the ledger with their digests, their matmul FLOPs and the CPU seconds of the call. `start`: the
    unchanged prefix p0 (0: whole copies); `per_forward`: copies per forward."""
    with timers.timed("hashing"):
        digests = copy_digests(loaded, item, spec, logits_to_keep)
    flops = call_flops(loaded, spec.heads, item["input_ids"].shape[1], start, logits_to_keep, per_forward)
    began = time.process_time()
    yield
    ledger.record_copies(digests, flops, time.process_time() - began)


def copy_digests(loaded, item: dict, spec, logits_to_keep: int) -> np.ndarray:
    """[n] uint64: each copy's digest (module docstring)."""
    n = spec.heads.shape[0]
    shared = hashlib.blake2b(_model(loaded)[0], digest_size=16)
    for name in sorted(item):
        value = item[name]
        if isinstance(value, torch.Tensor):
            shared.update(name.encode() + _bytes(value))
    shared.update(
        f"{spec.masking}|{logits_to_keep}|{spec.query_rows if isinstance(spec.query_rows, str) else ''}".encode()
    )
    return _row_digests(shared, _intervention_rows(spec, n))


def _intervention_rows(spec, n: int) -> list[np.ndarray]:
    """What batch row i of an Intervention alone decides: its heads, keys and rows (where tensors), bias and factor,
    each [n, bytes] uint8."""
    rows = [
        _rows_of(value, n) for value in (spec.heads, spec.keys, spec.query_rows) if isinstance(value, torch.Tensor)
    ]
    return rows + [_rows_of(torch.as_tensor(value, dtype=torch.float32), n) for value in (spec.bias, spec.factor)]


def _row_digests(shared, per_row: list[np.ndarray]) -> np.ndarray:
    """[n] uint64: row i's bytes (per_row: [n, bytes] arrays) hashed under the key of everything the rows share."""
    key = shared.digest()
    rows = np.concatenate(per_row, axis=1)  # [n, bytes]
    out = [hashlib.blake2b(row.tobytes(), digest_size=8, key=key).digest() for row in rows]
    return np.frombuffer(b"".join(out), dtype=np.uint64).copy()


def _rows_of(value: torch.Tensor, n: int) -> np.ndarray:
    """[n, bytes] uint8: copy i's share of a per-copy value ([n, ...] or one value for every copy)."""
    array = value.detach().cpu()
    array = array.expand(n, *array.shape[1:]) if array.ndim >= 1 and array.shape[0] == 1 else array
    array = array.reshape(1).expand(n) if array.ndim == 0 else array
    return np.ascontiguousarray(array.numpy()).reshape(n, -1).view(np.uint8)


def _bytes(value: torch.Tensor) -> bytes:
    """A tensor's bytes in memory order, for any dtype (bf16 and fp16 included, which numpy does not hold)."""
    return value.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


class LedgerCounter:
    """The copy ledger's counter for helpers.engine.copy_hook: a call's copies are hashed and counted only while
    the ledger is open (a chunk of a cached computation being computed, or a run's ledger folder:
    helpers.storage.ledger.is_open)."""

    @contextmanager
    def counted(self, loaded, item: dict, spec, start: int, logits_to_keep: int, per_forward: int):
        if not ledger.is_open():
            yield
            return
        with counted(loaded, item, spec, start, logits_to_keep, per_forward):
            yield

    def probe_copies(self, loaded, read, intervene):
        return ProbeCopies(loaded, read, intervene) if ledger.is_open() else None


COUNTER = LedgerCounter()  # stateless: one serves every call


def install_counter() -> None:
    """Install the copy ledger's counter in the engine (the runner does, for each notebook's kernel)."""
    copy_hook.install(COUNTER)


def active_counter():
    """The counter run_head_sets and probe report to: the installed one (copy_hook); else, while a ledger is open (a
    chunk of a cached computation being computed, or a run's ledger folder), the copy ledger's own, so that a cached
    computation keeps its copies' digests wherever it runs; else None, and the call computes and does nothing else."""
    installed = copy_hook.installed()
    if installed is not None:
        return installed
    return COUNTER if ledger.is_open() else None


class ProbeCopies:
    """The copies of one probe call (module docstring): ``step`` at each forward step, ``close`` when the probe
    ends without an error."""

    def __init__(self, loaded, read, intervene):
        self.loaded, self.spec = loaded, (read, intervene)
        self.digests: np.ndarray | None = None  # [B] uint64, from the first step
        self.flops = 0.0
        self.began = time.process_time()

    def step(self, tokens: torch.Tensor, start: int, end: int) -> None:
        """One forward step: ``tokens`` the text backbone's input [B, t] (ids) or [B, t, D] (embeddings) of
        positions [start, end)."""
        if self.digests is None:
            self.digests = probe_digests(self.loaded, tokens, start, *self.spec)
        shape = _model(self.loaded)[1]
        rows = tokens.shape[1]
        per_row = shape["layers"] * layer_flops(shape, rows, end) + head_flops(shape, rows)
        self.flops += tokens.shape[0] * per_row

    def close(self) -> None:
        if self.digests is not None:
            ledger.record_copies(self.digests, self.flops, time.process_time() - self.began)


def probe_digests(loaded, tokens: torch.Tensor, start: int, read, intervene) -> np.ndarray:
    """[B] uint64: each batch row's digest of a probe call (module docstring)."""
    batch = tokens.shape[0]
    flat = tokens.detach().reshape(batch, -1).double()  # [B, t * D]
    weights = torch.linspace(-1.0, 1.0, flat.shape[1], dtype=torch.float64, device=flat.device) ** 3  # [t * D]
    fingerprint = torch.stack([flat.sum(1), (flat * flat).sum(1), flat @ weights], 1).cpu().numpy()  # [B, 3]
    per_row = [fingerprint.view(np.uint8).reshape(batch, -1)]
    spec = f"probe|{start}"
    if read is not None:
        per_row += [_rows_of(read.groups[name], batch) for name in sorted(read.groups)]
        per_row += [_rows_of(read.query_rows, batch)] if isinstance(read.query_rows, torch.Tensor) else []
        spec += f"|read {read.per_row} {sorted(read.groups)} {_named(read.query_rows)}"
    if intervene is not None:
        per_row += _intervention_rows(intervene, batch)
        spec += f"|intervene {intervene.masking} {_named(intervene.query_rows)}"
    shared = hashlib.blake2b(_model(loaded)[0], digest_size=16)
    shared.update(spec.encode())
    return _row_digests(shared, per_row)


def _named(query_rows) -> str:
    """A query-row selection's name ("all") or "" for a tensor (hashed per row)."""
    return query_rows if isinstance(query_rows, str) else ""


def call_flops(loaded, heads: torch.Tensor, length: int, start: int, logits_to_keep: int, per_forward: int) -> float:
    """Matmul FLOPs of one run_head_sets call (module docstring): n copies of the rows [start, length)."""
    shape = _model(loaded)[1]
    adapter = loaded.adapter
    n = heads.shape[0]
    used = heads.any(0).any(-1).nonzero().flatten()
    if used.numel() == 0:  # every set is empty: one clean forward, repeated
        first, n_copies = shape["layers"], 0
    else:
        split = adapter.candidate_layers[int(used[0])]
        first, n_copies = (split if split >= adapter.min_split_layer else 0), n
    rows = length - start
    per_layer = layer_flops(shape, rows, length)
    forwards = -(-n // per_forward)
    head = head_flops(shape, logits_to_keep or rows)
    return n_copies * ((shape["layers"] - first) * per_layer) + forwards * first * per_layer + n * head


def head_flops(shape: dict, n_rows: int) -> float:
    """Matmul FLOPs of the output head at `n_rows` rows."""
    return 2 * shape["hidden"] * shape["vocab"] * n_rows


def layer_flops(shape: dict, n_rows: int, n_keys: int) -> float:
    """Matmul FLOPs of one decoder layer on `n_rows` query rows attending over `n_keys` keys: the q, k, v and
    output projections, the scores and the weighted values, and the gated MLP (three [D, F] matmuls)."""
    d, q, kv, f = shape["hidden"], shape["q"], shape["kv"], shape["mlp"]
    return 2 * n_rows * d * (q + 2 * kv) + 2 * n_rows * q * d + 2 * 2 * n_rows * n_keys * q + 2 * n_rows * 3 * d * f


def text_shape(config, vocab: int) -> dict:
    """The text backbone's sizes that set a copy's matmuls, from its config."""
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    return {
        "layers": config.num_hidden_layers,
        "hidden": config.hidden_size,
        "q": heads * head_dim,
        "kv": (getattr(config, "num_key_value_heads", None) or heads) * head_dim,
        "mlp": config.intermediate_size,
        "vocab": vocab,
    }


def _model(loaded) -> tuple[bytes, dict]:
    """(identity bytes, text shape) of a loaded model, worked out once per model object."""
    known = _MODELS.get(loaded.model)
    if known is None:
        model = loaded.model
        identity = f"{model_fingerprint(loaded)}|{model.dtype}|{model.device.type}".encode()
        vocab = model.get_output_embeddings().weight.shape[0]
        shape = text_shape(loaded.adapter.language_model(model).config, vocab)
        known = _MODELS[model] = (identity, shape)
    return known
