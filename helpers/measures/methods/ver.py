"""VER heads, visual evidence retrieval (VERA: "Identifying and Leveraging Visual Evidence Retrieval Heads in
Long-Context Understanding").

Source: Prongcan/VERA, vera/analysis/full_analysis.py ``process_single_folder`` (mode "scan") and
``run_full_analysis`` (phase 1), with the attention captured by vera/models/qwen.py ``capture_attention`` (prefill of
the first N-1 prompt tokens, then the LAST PROMPT TOKEN alone with output_attentions: its row, the one that predicts
the first answer token; saved as attn_first_token.json). Per item and head: the attention on the visual tokens
(between <|vision_start|> and <|vision_end|>), weighted by a 0/1 mask of the patches that overlap the evidence's
boxes, divided by the total visual attention + 1e-9 -> the evidence share of the image attention. Phase 1 averages
it over items and takes the global top 5 heads; the paper validates them by masking (o_proj columns zeroed) and by
the VERA pipeline's gains.

Here: the evidence is the item's asked-about region (``item.target``: a strip's panel, a grid's cell), its tokens
those overlapping the box (adapter.region_mask); the visual tokens are every image token. One forward per batch of
items; the probe reads the last prompt row's mass to both groups (helpers.engine.attention.Read).

Deviations: their evidence boxes come from red-highlighted rendered text (colour threshold, dilation, contours);
ours are the stimuli's own boxes. A region that holds every image token (single-image items) gives 1 for every
head and is refused.
"""

from __future__ import annotations

import numpy as np
import torch

from helpers.engine.attention import Read, probe
from helpers.engine.inputs import build_batch
from helpers.measures.methods.common import mean_score, need_items, need_regions

EPSILON = 1e-9  # full_analysis.py: total_attn = np.sum(attn_array) + 1e-9


def ver_ratio(evidence_mass: np.ndarray, image_mass: np.ndarray) -> np.ndarray:
    """The VER score of each item and head: evidence mass / (image mass + 1e-9), same shapes in and out."""
    return np.asarray(evidence_mass, dtype=np.float64) / (np.asarray(image_mass, dtype=np.float64) + EPSILON)


@torch.no_grad()
def ver_per_item(lm, items, items_per_forward: int = 16) -> np.ndarray:
    """[N, L, H]: each item's VER score."""
    out = []
    device = lm.model.device
    for start in range(0, len(items), items_per_forward):
        chunk = items[start : start + items_per_forward]
        batch = build_batch(lm.processor, chunk)
        evidence = torch.stack(
            [lm.adapter.region_mask(batch.inputs, i.boxes[i.target], i.image.size, b) for b, i in enumerate(chunk)]
        )
        full = (evidence == batch.image_mask).all(1)
        if full.any():
            bad = chunk[int(full.nonzero()[0])]
            raise ValueError(
                f"ver: the evidence region of a {bad.kind!r} item holds every image token, so every share is 1; "
                "use items whose asked-about region is part of the image (strips, grids)"
            )
        read = Read(
            query_rows=batch.last_prompt_mask.to(device),
            groups={"evidence": evidence.to(device), "image": batch.image_mask.to(device)},
        )
        with probe(lm, read=read) as rec:
            lm.model(**{k: v.to(device) for k, v in batch.inputs.items()})
        mass = rec.mass.double().cpu().numpy()  # [B, L, H, 2]
        out.append(ver_ratio(mass[..., 0], mass[..., 1]))
    return np.concatenate(out)


def ver_items(lm, items) -> dict[str, np.ndarray]:
    """{"score": [N, L, H]}: each item's evidence share of the last prompt token's image attention."""
    items = need_items(items, "ver")
    need_regions(lm, "ver")
    return {"score": ver_per_item(lm, items)}


def ver_score(lm, items) -> np.ndarray:
    """VER score [L, H]: the mean over items of the evidence share of the last prompt token's image attention."""
    return mean_score(ver_items(lm, items))
