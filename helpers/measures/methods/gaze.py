"""Gaze heads (Gandikota et al., "Gaze Heads: How VLMs Look at What They Describe").

Source: rohitgandikota/gaze-heads, 01_discover_gaze_heads.py ``main`` with gaze_heads/gaze.py
``collect_last_query_attentions`` and ``aggregate_region_attention``. For every strip their code asks one question
per panel k ("What is happening in the k-th panel from the left? Answer briefly."), runs the prompt alone (prefill),
takes the post-softmax attention of the LAST PROMPT TOKEN and sums it, raw (no renormalisation), over each panel's
image tokens -> a queried-panel x attended-panel matrix [P, L, H, P] per strip; averaged over strips, a head's gaze
score is the mean of the diagonal (queried = attended). Heads are ranked by it; the paper steers the top 100.

Here: each strip item of the project (``strip_ord`` / ``strip_ref``) is asked about every one of its panels with the
project's own question of the item's query kind (helpers.stimuli.corpora.strip_question), one forward of the P
variants per strip; the probe reads the last prompt row's mass to each panel's tokens (helpers.engine.attention.Read).

Deviations: the project's 3 x 2 strips and questions ("What is in panel p?" / "Which panel shows the <label>?")
instead of their 1 x 6 horizontal strip with gaps and their narration question; panel tokens are the image tokens
that overlap the panel box (adapter.region_mask), theirs split the merged grid's columns in proportion to the panel
widths (the same tokens for aligned panels).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from helpers.engine.attention import Read, probe
from helpers.engine.inputs import build_batch
from helpers.engine.item import Item
from helpers.measures.methods.common import mean_score, need_items, need_regions
from helpers.stimuli.corpora import strip_question


def panel_names(item: Item) -> list[str]:
    """The item's panels in reading order; an item that is not a strip is refused."""
    names = [name for name in item.boxes if name.startswith("panel ")]
    if not item.kind.startswith("strip_") or len(names) < 2:
        raise ValueError(
            f"gaze needs strip items (several 'panel k' regions, one question per panel); got a {item.kind!r} item"
        )
    return sorted(names, key=lambda name: int(name.split()[1]))


def panel_variants(item: Item) -> list[Item]:
    """The strip asked about each of its panels in turn, with the item's query kind (ord or ref)."""
    query = item.kind.removeprefix("strip_")
    variants = []
    for index, name in enumerate(panel_names(item)):
        prompt, span, answer = strip_question(query, list(item.labels), index)
        variants.append(dataclasses.replace(item, prompt=prompt, query_span=span, answer=answer, target=name))
    return variants


def gaze_from_panel_mass(mass: np.ndarray) -> np.ndarray:
    """Gaze score [L, H] from the last-token panel masses [N, P, L, H, P] (strip, queried panel, layer, head,
    attended panel): the mean over strips and panels of the diagonal (queried == attended)."""
    mass = np.asarray(mass, dtype=np.float64)
    if mass.ndim != 5 or mass.shape[1] != mass.shape[4]:
        raise ValueError(f"panel mass must be [N, P, L, H, P], got {mass.shape}")
    diagonal = np.stack([mass[:, p, :, :, p] for p in range(mass.shape[1])], 1)  # [N, P, L, H]
    return diagonal.mean((0, 1))


@torch.no_grad()
def strip_panel_mass(lm, item: Item) -> np.ndarray:
    """[P, L, H, P]: the raw attention mass the last prompt token sends to each panel, one row per queried panel."""
    variants = panel_variants(item)
    names = panel_names(item)
    batch = build_batch(lm.processor, variants)
    device = lm.model.device
    groups = {
        name: torch.stack(
            [lm.adapter.region_mask(batch.inputs, v.boxes[name], v.image.size, b) for b, v in enumerate(variants)]
        ).to(device)
        for name in names
    }
    read = Read(query_rows=batch.last_prompt_mask.to(device), groups=groups)
    with probe(lm, read=read) as rec:
        lm.model(**{k: v.to(device) for k, v in batch.inputs.items()})
    return rec.mass.float().cpu().numpy()  # [P, L, H, P]


def gaze_per_item(lm, items) -> dict[str, np.ndarray]:
    """{"score": [N, L, H]}: each strip's gaze score (the diagonal of its panel masses, mean over its panels)."""
    items = need_items(items, "gaze")
    need_regions(lm, "gaze")
    return {"score": np.stack([gaze_from_panel_mass(strip_panel_mass(lm, item)[None]) for item in items])}


def gaze_score(lm, items) -> np.ndarray:
    """Gaze score [L, H] over strip items: each strip asked about every panel (see the module docstring); the mean
    over strips of the per-strip means equals the mean over (strip, panel) since every strip has the same panels."""
    return mean_score(gaze_per_item(lm, items))
