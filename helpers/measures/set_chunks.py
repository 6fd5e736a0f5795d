"""The cached parts that the S-against-random runs share: the items' clean letter probabilities, and the chunks of
their stacks of head-sets, made of the parts of each set.

clean_run caches the items' clean letter probabilities on disk without the head-sets, so that the runs of every table
share one clean forward per item.

necessity_run and steering_run cache their results per chunk of items per stack of head-sets [n, L, H] (the stack's
digest, head_sets_key, in the key). One set is often in several stacks (S with the first r random draws in one
table, with all R in another; a notebook reading another's sets), so a stack's chunk is assembled set by set from
parts: set j's part holds its results on the chunk's items [start, start + chunk), or on the first of them where a
run of fewer items ended in a shorter chunk (item i does not depend on the item count); its key is the stack's with
that set's digest in place of the stack's and "part" in place of "chunk". What no part holds is computed item by
item, each item in one call for every set missing it (the engine still runs many sets per forward; an item's copies
never shared a call with another item's), and the parts that grew are saved. In the copy ledger
(helpers.storage.ledger) the parts read count as read back, not computed.

A set computed beside other sets differs from the same set computed beside others only in the order of floating-point
sums (the layers and forwards the engine shares among a call's sets, as with sets_per_forward: far below the tables'
resolution), so which stack computed a set first may move its results at that level, never more. Two processes racing
on one set both compute it and both save its part (atomically, the later file replacing the earlier): nothing breaks.
"""

import hashlib
from collections.abc import Callable

import numpy as np
import torch

from helpers.engine.inputs import item_batch
from helpers.engine.mcq import letter_probs
from helpers.engine.model_files import model_identity
from helpers.stimuli.corpora import Item, corpus_key, items_of
from helpers.storage import ledger
from helpers.storage.cache import ResultCache, computation_key


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
    chunk: int,
    compute: Callable[[np.ndarray, int, int], dict],
) -> dict[str, np.ndarray]:
    """Chunk [start, stop) of the stack `head_sets` [n, L, H] that ResultCache.cached_chunks(name, key, n_items, chunk,
    ...) asks its compute for (key["params"]["head_sets"] is the stack's digest), made of each set's part: items
    [start, start + chunk) of that set alone, or those of them cached so far (a run of fewer items ends in a shorter
    chunk); the items no part holds are computed one at a time, each by one call compute(sets [m, L, H], i,
    i + 1) for the sets missing it, and the parts that grew saved. compute's arrays hold the items on axis 0; those
    of two or more axes one column per set on axis 1, the others the items' own."""
    head_sets = np.asarray(head_sets, dtype=bool)
    keys = [_part_key(key, one, start, start + chunk) for one in head_sets]
    digests = [part_key["params"]["head_sets"] for part_key in keys]
    first = {}  # each set's first place in the stack: a set in it twice is read or computed once
    for j, digest in enumerate(digests):
        first.setdefault(digest, j)
    parts = {}  # set digest -> (arrays, copies [items, copies per item]) of items start, start + 1, ...
    for digest, j in first.items():
        entry = cache.load_entry(name, keys[j])
        if entry is not None:
            arrays, copies = entry
            per_item = len(copies) // len(next(iter(arrays.values())))  # copies per item
            parts[digest] = _items(arrays, copies.reshape(-1, per_item), stop - start)
            ledger.part_read(cache.path(name, keys[j]), parts[digest][1].ravel())
    grown = set()
    for item in range(start, stop):
        missing = [j for digest, j in first.items() if _count(parts.get(digest)) == item - start]
        if not missing:
            continue
        with ledger.recorded() as calls:
            arrays = {label: np.asarray(value) for label, value in compute(head_sets[missing], item, item + 1).items()}
        for i, (j, copies) in enumerate(zip(missing, _copies_per_set(calls, len(missing)))):
            column = {label: value[:, i : i + 1] if value.ndim > 1 else value for label, value in arrays.items()}
            parts[digests[j]] = _appended(parts.get(digests[j]), column, copies[None])
            grown.add(j)
    for j in grown:
        ledger.part_saved(cache.save(name, keys[j], parts[digests[j]][0], parts[digests[j]][1].ravel()))
    ordered = [parts[digest][0] for digest in digests]
    return {
        label: np.concatenate([part[label] for part in ordered], axis=1) if value.ndim > 1 else value
        for label, value in ordered[0].items()
    }


def _part_key(key: dict, head_set: np.ndarray, start: int, stop: int) -> dict:
    """The key of the part [start, stop) of `head_set` [L, H]: the stack's key with that set alone in it, and never
    a chunk's key (a part may hold fewer items than its chunk)."""
    return {**key, "params": {**key["params"], "head_sets": head_sets_key(head_set[None])}, "part": [start, stop]}


def _items(arrays: dict, copies: np.ndarray, n_items: int) -> tuple[dict, np.ndarray]:
    """A part's first `n_items` items (all it holds, when fewer)."""
    return {label: value[:n_items] for label, value in arrays.items()}, copies[:n_items]


def _count(part: tuple[dict, np.ndarray] | None) -> int:
    """The items a part holds (none for a set without one)."""
    return 0 if part is None else len(part[1])


def _appended(part: tuple[dict, np.ndarray] | None, arrays: dict, copies: np.ndarray) -> tuple[dict, np.ndarray]:
    """A part (None: an empty one) with one more item's arrays and copies [1, copies per item] after its own."""
    if part is None:
        return arrays, copies
    held, held_copies = part
    return {label: np.concatenate([value, arrays[label]]) for label, value in held.items()}, np.concatenate(
        [held_copies, copies]
    )


def _copies_per_set(calls: list[np.ndarray], n_sets: int) -> list[np.ndarray]:
    """Per set, the digests of its copies among `calls` (one array per run_head_sets call, its copies in blocks of
    the `n_sets` sets in order: set i at i, n_sets + i, ...)."""
    if not calls:
        raise RuntimeError(
            "no run_head_sets call was counted: a cached computation keeps its copies' digests, so install the copy "
            "ledger's counter first (helpers.engine.copy_ledger.install_counter(), as the runner does per notebook)"
        )
    if any(len(call) % n_sets for call in calls):
        raise ValueError(f"a run_head_sets call's copies are not blocks of the {n_sets} sets computed")
    blocks = [call.reshape(-1, n_sets) for call in calls]
    return [np.concatenate([block[:, i] for block in blocks]) for i in range(n_sets)]


@torch.no_grad()
def clean_probs(lm, items: list[Item]) -> np.ndarray:
    """[N, 4] P(A..D) of each item without intervention, one item per forward (as the runs see it)."""
    return torch.stack([letter_probs(lm.model, lm.processor, item_batch(lm.processor, i))[0] for i in items]).numpy()


def clean_run(lm, kind: str, corpus: str, n_items: int, seed: int, cache: ResultCache, chunk: int = 10) -> np.ndarray:
    """[N, 4] clean_probs of the first `n_items` items of `kind`, cached per chunk (keyed without head-sets)."""
    key = computation_key(
        **model_identity(lm),
        corpus=corpus_key(corpus),
        params={"kind": kind, "seed": seed},
        code_module=__name__,
    )

    def compute(start: int, stop: int) -> dict:
        return {"p_clean": clean_probs(lm, items_of(kind, corpus, n_items, seed)[start:stop])}

    return cache.cached_chunks("clean", key, n_items, chunk, compute)["p_clean"]
