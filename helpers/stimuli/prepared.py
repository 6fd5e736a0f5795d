"""Evaluation items prepared once per process and shared by every run that uses them.

- `items_of`: the rendered items of one kind, corpus, size and seed (each image drawn once per process,
  not once per chunk and run);
- `item_batch`: the one-item processor batch of an item (tokenised and image-processed once);
- `clean_run`: the items' clean letter probabilities, cached on disk without the head-sets, so the
  S-against-random runs of every table share one clean forward per item.
"""

import functools

import numpy as np
import torch

from helpers.engine.head_sets import on_device, remember_item
from helpers.engine.inputs import Batch, build_batch
from helpers.engine.loading import processor_fingerprint
from helpers.engine.mcq import letter_probs
from helpers.engine.model_files import model_fingerprint
from helpers.stimuli.corpora import Item, build_items, corpus_identity, load_corpus
from helpers.storage.cache import ResultCache, computation_key

BATCH_MEMORY = 2**30  # bytes of tensors the batch memo may hold (the toy's 400 batches take ~10 MiB)

_batches: dict[int, tuple[Item, object, Batch]] = {}  # id(item) -> (item, processor, batch)


@functools.lru_cache(maxsize=8)
def corpus_of(corpus: str):
    """load_corpus(corpus), once per process (an image folder is scanned and checked once)."""
    return load_corpus(corpus)


def corpus_key(corpus: str) -> str:
    """What a cache key records of the corpus named `corpus` (its name, or an image corpus's content)."""
    return corpus_identity(corpus_of(corpus))


def model_identity(lm) -> dict[str, str]:
    """What a cache key records of the model `lm` runs: computation_key's model_fingerprint, processor_fingerprint,
    dtype and device_kind."""
    return {
        "model_fingerprint": model_fingerprint(lm),
        "processor_fingerprint": processor_fingerprint(lm),
        "dtype": str(lm.model.dtype),
        "device_kind": lm.model.device.type,
    }


@functools.lru_cache(maxsize=32)
def items_of(kind: str, corpus: str, n: int, seed: int) -> tuple[Item, ...]:
    """build_items(kind, corpus, n, seed), rendered once per process (item i does not depend on n)."""
    return tuple(build_items(kind, corpus_of(corpus), n, seed))


def _nbytes(batch: Batch) -> int:
    return sum(v.numel() * v.element_size() for v in batch.inputs.values() if isinstance(v, torch.Tensor))


def item_batch(processor, item: Item) -> Batch:
    """build_batch(processor, [item]), memoised per item object while the memo stays under BATCH_MEMORY."""
    hit = _batches.get(id(item))
    if hit is not None and hit[0] is item and hit[1] is processor:
        return hit[2]
    batch = build_batch(processor, [item])
    if sum(_nbytes(b) for _, _, b in _batches.values()) + _nbytes(batch) <= BATCH_MEMORY:
        _batches[id(item)] = (item, processor, batch)  # holding the item keeps its id from being reused
    return batch


def remember_items(lm, items: list[Item]) -> None:
    """Build each item's batch (item_batch) and let the engine record the clean item (remember_item), so that
    workers forked afterwards find both in memory."""
    for item in items:
        remember_item(lm, on_device(lm, item_batch(lm.processor, item).inputs))


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
