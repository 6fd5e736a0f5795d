"""Evaluation items prepared once per process and shared by every run that uses them.

- `items_of`: the rendered items of one kind, corpus, size and seed (each image drawn once per process,
  not once per chunk and run);
- `item_batch`: the one-item processor batch of an item (tokenised and image-processed once);
- `corpus_of`: a corpus, loaded once.
"""

import functools

import torch

from helpers.engine.head_sets import on_device, remember_item
from helpers.engine.inputs import Batch, build_batch
from helpers.stimuli.corpora import Item, build_items, load_corpus

BATCH_MEMORY = 2**30  # bytes of tensors the batch memo may hold (the toy's 400 batches take ~10 MiB)

_batches: dict[int, tuple[Item, object, Batch]] = {}  # id(item) -> (item, processor, batch)


@functools.lru_cache(maxsize=8)
def corpus_of(corpus: str):
    """load_corpus(corpus), once per process (an image folder is scanned and checked once)."""
    return load_corpus(corpus)


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
