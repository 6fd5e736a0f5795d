"""Stacks of head-sets in cache keys, and a stack's chunk made of the chunks of its sets alone.

necessity_run and steering_run cache their results per chunk of items per stack of head-sets [n, L, H] (the stack's
digest, head_sets_key, in the key). One set is often in several stacks (S with the first r random draws in one
table, with all R in another; a notebook reading another's sets), so a stack's chunk is assembled set by set: set j's
arrays are read from the chunk of the stack of set j alone (the same key, that set's digest in place of the stack's)
when it is cached, and the sets missing there are computed together in one call (the engine still runs many sets per
forward), each then saved as the chunk of its own. In the copy ledger (helpers.storage.ledger) the sets read count as
read back, not computed.

A set computed beside other sets differs from the same set computed beside others only in the order of floating-point
sums (the layers and forwards the engine shares among a call's sets, as with sets_per_forward: far below the tables'
resolution), so which stack computed a set first may move its results at that level, never more. Two processes racing
on one set both compute it and both save it (atomically, the later file replacing the earlier): nothing breaks.
"""

import hashlib
from collections.abc import Callable

import numpy as np

from helpers.storage import ledger
from helpers.storage.cache import ResultCache


def head_sets_key(head_sets: np.ndarray) -> str:
    """A short hash of a stack of head-sets [n, L, H], for cache keys."""
    head_sets = np.asarray(head_sets, dtype=bool)
    return f"{head_sets.shape}:{hashlib.sha256(np.packbits(head_sets).tobytes()).hexdigest()[:16]}"


def chunk_of_sets(
    cache: ResultCache,
    name: str,
    key: dict,
    head_sets: np.ndarray,
    start: int,
    stop: int,
    compute: Callable[[np.ndarray, int, int], dict],
) -> dict[str, np.ndarray]:
    """Chunk [start, stop) of the stack `head_sets` [n, L, H] that ResultCache.cached_chunks(name, key, ...) asks its
    compute for (key["params"]["head_sets"] is the stack's digest): each set's arrays from the cached chunk of that set
    alone, the other sets' from one call compute(sets [m, L, H], start, stop), saved as chunks of their own. compute's
    arrays hold the items on axis 0; those of two or more axes one column per set on axis 1, the others the items'."""
    head_sets = np.asarray(head_sets, dtype=bool)
    if len(head_sets) < 2:
        return compute(head_sets, start, stop)  # the stack's chunk is its one set's
    keys = [_set_key(key, one, start, stop) for one in head_sets]
    digests = [set_key["params"]["head_sets"] for set_key in keys]
    first = {}  # each set's first place in the stack: a set in it twice is read or computed once
    for j, digest in enumerate(digests):
        first.setdefault(digest, j)
    parts = {}
    for digest, j in first.items():
        entry = cache.load_entry(name, keys[j])
        if entry is not None:
            parts[digest] = entry[0]
            ledger.part_read(cache.path(name, keys[j]), entry[1])
    missing = [j for digest, j in first.items() if digest not in parts]
    if missing:
        with ledger.recorded() as calls:
            arrays = {label: np.asarray(value) for label, value in compute(head_sets[missing], start, stop).items()}
        for i, (j, copies) in enumerate(zip(missing, _copies_per_set(calls, len(missing)))):
            part = {label: value[:, i : i + 1] if value.ndim > 1 else value for label, value in arrays.items()}
            ledger.part_saved(cache.save(name, keys[j], part, copies))
            parts[digests[j]] = part
    ordered = [parts[digest] for digest in digests]
    return {
        label: np.concatenate([part[label] for part in ordered], axis=1) if value.ndim > 1 else value
        for label, value in ordered[0].items()
    }


def _set_key(key: dict, head_set: np.ndarray, start: int, stop: int) -> dict:
    """The cached_chunks key of chunk [start, stop) of the stack of `head_set` [L, H] alone."""
    return {**key, "params": {**key["params"], "head_sets": head_sets_key(head_set[None])}, "chunk": [start, stop]}


def _copies_per_set(calls: list[np.ndarray], n_sets: int) -> list[np.ndarray]:
    """Per set, the digests of its copies among `calls` (one array per run_head_sets call, its copies in blocks of
    the `n_sets` sets in order: set i at i, n_sets + i, ...)."""
    if any(len(call) % n_sets for call in calls):
        raise ValueError(f"a run_head_sets call's copies are not blocks of the {n_sets} sets computed")
    blocks = [call.reshape(-1, n_sets) for call in calls]
    return [np.concatenate([block[:, i] for block in blocks]) for i in range(n_sets)]
