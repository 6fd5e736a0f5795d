"""How much attention each head sends to named key groups on evaluation items, and statistics of
that mass over the heads of a set.

The groups of one item: "image" (its image tokens), "text" (its prompt text: question and options)
and "first" (the first real token of the sequence, where attention sinks park their mass). Masses are
read at the rows of a row group (helpers.engine.row_groups.ROW_GROUPS), averaged over those rows and then
over items: [L, H] per group. They select attention-sink and text-heavy heads (generic-damage sets),
match random controls on image attention, and relate a set's image attention to its CERS (Table 17).
"""

import numpy as np
import pandas as pd
import torch

from helpers.engine.attention import Read, probe
from helpers.engine.inputs import Batch, build_batch
from helpers.engine.mcq import row_selection
from helpers.engine.model_files import model_identity
from helpers.engine.row_groups import takes_row_group
from helpers.stimuli.corpora import Item, corpus_key, items_of
from helpers.storage.cache import ResultCache, computation_key

GROUPS = ("image", "text", "first")


def key_groups(batch: Batch) -> dict[str, torch.Tensor]:
    """Group name -> bool [B, T] keys of every item of a built batch."""
    present = batch.inputs["attention_mask"].bool()  # [B, T]
    first = torch.zeros_like(present)
    first[torch.arange(present.shape[0]), present.int().argmax(1)] = True  # first non-pad token
    return {"image": batch.image_mask, "text": batch.prompt_text_mask, "first": first}


@takes_row_group
@torch.no_grad()
def item_masses(lm, items: list[Item], row_group: str = "prompt") -> dict[str, np.ndarray]:
    """Group name -> [N, L, H]: each item's attention mass to the group, mean over the rows of `row_group`."""
    batch = build_batch(lm.processor, items)
    device = lm.model.device
    selected = row_selection(batch, row_group)
    read = Read(
        query_rows=selected if isinstance(selected, str) else selected.to(device),
        groups={name: keys.to(device) for name, keys in key_groups(batch).items()},
    )
    with probe(lm, read=read) as rec:
        lm.model(**{name: value.to(device) for name, value in batch.inputs.items()})
    mass = rec.mass.float().cpu().numpy()  # [B, L, H, G]
    return {name: mass[..., g] for g, name in enumerate(rec.group_names)}


@takes_row_group
def mass_run(
    lm,
    corpus: str,
    kind: str,
    n_items: int,
    seed: int,
    row_group: str,
    cache: ResultCache,
    items_per_forward: int = 16,
) -> dict[str, np.ndarray]:
    """Group name -> [L, H]: item_masses over `n_items` items of `kind` (corpora.KINDS) of `corpus`,
    averaged over items; per-item masses are cached per chunk."""
    key = computation_key(
        **model_identity(lm),
        corpus=corpus_key(corpus),
        params={"kind": kind, "seed": seed, "row_group": row_group, "items_per_forward": items_per_forward},
        code_module=__name__,
    )
    per_item = cache.cached_chunks(
        "head_mass",
        key,
        n_items,
        items_per_forward,
        lambda start, stop: item_masses(lm, list(items_of(kind, corpus, n_items, seed)[start:stop]), row_group),
        one_copy_per_item=True,  # one read row per item
    )
    return {name: values.mean(0) for name, values in per_item.items()}


def set_mass_statistics(mass: np.ndarray, head_sets: np.ndarray) -> pd.DataFrame:
    """One row per head-set [n, L, H]: mean, median, min, max and SD (ddof 0) of `mass` [L, H] over its heads."""
    rows = []
    for head_set in np.asarray(head_sets, dtype=bool):
        values = mass[head_set]
        if values.size == 0:
            raise ValueError("an empty head-set has no mass statistics")
        rows.append(
            {
                "mean": values.mean(),
                "median": np.median(values),
                "min": values.min(),
                "max": values.max(),
                "SD": values.std(),
            }
        )
    return pd.DataFrame(rows)
