"""How much attention each head sends to the image: the engine's read at its simplest, for items or a built batch."""

from __future__ import annotations

import torch

from helpers.engine.attention import Read, probe
from helpers.engine.head_sets import on_device
from helpers.engine.inputs import Batch, as_batch
from helpers.engine.item import Item
from helpers.engine.mcq import row_selection
from helpers.engine.row_groups import takes_row_group


@takes_row_group
@torch.no_grad()
def image_mass(loaded, items: Item | Batch, row_group: str = "last") -> torch.Tensor:
    """[B, L, H]: the attention mass each head of each candidate layer sends to each item's image tokens, mean over
    the rows of the row group ``row_group`` ("all", "image", "prompt" or "last": helpers.engine.row_groups.ROW_GROUPS).
    ``items``: an Item (built with the model's processor) or a Batch (build_batch)."""
    batch = as_batch(loaded, items)
    device = loaded.model.device
    selected = row_selection(batch, row_group)
    read = Read(
        query_rows=selected if isinstance(selected, str) else selected.to(device),
        groups={"image": batch.image_mask.to(device)},
    )
    with probe(loaded, read=read) as recording:
        loaded.model(**on_device(loaded, batch.inputs), use_cache=False)
    return recording.mass[..., 0].cpu()
