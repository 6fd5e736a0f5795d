"""The engine's front door for one item: an ``Item``, a built ``Batch`` of one item, or a processor output, turned
into the processor output a forward takes and checked against the family's input layout before any forward."""

from __future__ import annotations

import torch

from helpers.engine.inputs import Batch, build_batch
from helpers.engine.item import Item


def one_item_inputs(loaded, item: Item | Batch | dict) -> dict:
    """The processor output of one item (batch 1), checked (``Adapter.check_inputs``): an Item is built with the
    model's processor (build_batch); a Batch must hold one item; a dict is taken as a processor output."""
    if isinstance(item, Item):
        inputs = build_batch(loaded.processor, [item]).inputs
    elif isinstance(item, Batch):
        if len(item.items) != 1:
            raise ValueError(f"the Batch holds {len(item.items)} items; pass a Batch of one item (or the Item)")
        inputs = item.inputs
    elif isinstance(item, dict):
        inputs = item
    else:
        raise TypeError(f"item is a {type(item).__name__}; pass an Item, a Batch of one item or a processor output")
    loaded.adapter.check_inputs(inputs)
    return inputs


def as_batch(loaded, items: Item | Batch) -> Batch:
    """A built Batch: an Item is built with the model's processor (build_batch), a Batch is taken as it is."""
    if isinstance(items, Item):
        return build_batch(loaded.processor, [items])
    if isinstance(items, Batch):
        return items
    raise TypeError(f"items is a {type(items).__name__}; pass an Item or a Batch (build_batch)")


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
