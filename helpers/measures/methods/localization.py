"""Localization heads (Kang et al., "Your Large Vision-Language Model Only Needs A Few Attention Heads For Visual
Grounding", CVPR 2025).

Source: seilk/LocalizationHeads, localization_heads_finder.py, class ``LocalizationHeadsFinder``: ``collect_attention``
(prefill attention of the LAST PROMPT TOKEN to the image tokens, [L, H, 1, vis_len]), ``vis_attn_summation``
(criterion 1: the head's attention summed over the image tokens), ``find_elbow_point`` (the chord method on the
sorted sums: the point farthest from the line joining the first and last points), ``spatial_entropy`` (criterion 2:
the map minus its mean, clipped at 0 (relu); binarised at > 0.001; 8-connected components (scipy.ndimage.label with
a 3 x 3 structure); p_i = component sum / sum of the clipped map; entropy -sum p_i log p_i, natural log; a map with
nothing above its mean gets +inf) and ``analyze_attention_file`` (heads above the elbow sorted by spatial entropy,
lower = more localised). Per item. The paper then counts, over its 1,000 RefCOCO items, how often each head is among
the lowest-entropy heads of an item (selection frequency) and keeps the few most frequent; it validates them by
training-free grounding (REC / RES accuracy of the heads' combined maps).

Here: per item, one forward reads the last prompt row's attention to every image token (helpers.engine.top_key);
the map is laid out on the adapter's image-token grid; criterion 1 per item as their code does; among the heads above
the elbow, the ``per_item_top`` of lowest spatial entropy get one vote; the score is the vote frequency over items.

Deviations:
- Their ``find_elbow_point`` returns the flat head index (l * H + h) of the elbow head and ``analyze_attention_file``
  keeps the heads whose INDEX is >= it: a selection by position in the model, not by attention sum (a known bug).
  Implemented as intended: the heads whose attention sum is >= the sum at the elbow (``value_elbow``).
- Their map is reshaped to a square sqrt(vis_len) x sqrt(vis_len) (LLaVA-1.5's 24 x 24); ours uses the true grid
  (rows, cols) of the image tokens, so non-square Qwen grids work.
- The aggregation over items (vote frequency of the ``per_item_top`` = 10 lowest-entropy heads) follows the paper's
  description; the repository analyses one item at a time.
- Ties: on small models many heads of an item sit at an entropy of 0 (one component), more than ``per_item_top``, so
  which of them vote is a tie-break. ``analyze_attention_file`` sorts its (layer, head)-ordered list with Python's
  stable sort, so its ties go to the lower head index; here the same order, with entropies equal within
  overlap.SCORE_TIE tied (theirs compare floats exactly, so float noise near 0 can reorder them).
- ``analyze_attention_file`` also records a ``bottom_row_focus`` flag (every cell of the map's last row in a
  component) but neither sorts nor filters by it (seilk/LocalizationHeads at 8ce33b0); it is not computed here.
Images of fewer than 2 tokens (the toy's single-image items) and adapters without an image-token grid are refused.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy import ndimage

from helpers.engine.top_key import attention_rows
from helpers.measures.methods.common import mean_score, need_items, one_batch
from helpers.measures.overlap import ranking

BINARY_THRESHOLD = 0.001  # spatial_entropy(attention_map, threshold=0.001)
PER_ITEM_TOP = 10  # the paper's top-10 lowest-entropy heads per item


def chord_elbow(values: np.ndarray) -> int:
    """Index into ``np.sort(values)`` (ascending) of the elbow: the point (i, value_i) farthest from the chord
    joining the first and last points (find_elbow_point's geometry, with raw index and value units)."""
    y = np.sort(np.asarray(values, dtype=np.float64).ravel())
    if y.size < 3:
        raise ValueError(f"an elbow needs at least 3 values, got {y.size}")
    points = np.stack([np.arange(y.size, dtype=np.float64), y], 1)
    line = points[-1] - points[0]
    unit = line / np.linalg.norm(line)
    offsets = points - points[0]
    distances = np.linalg.norm(offsets - np.outer(offsets @ unit, unit), axis=1)
    return int(np.argmax(distances))


def value_elbow(values: np.ndarray) -> np.ndarray:
    """Bool mask, same shape as ``values``: the values at or above the elbow value (criterion 1 as intended)."""
    values = np.asarray(values, dtype=np.float64)
    threshold = np.sort(values.ravel())[chord_elbow(values)]
    return values >= threshold


def spatial_entropy(attention_map: np.ndarray, threshold: float = BINARY_THRESHOLD) -> float:
    """Spatial entropy of a 2-D attention map [rows, cols] (their ``spatial_entropy``): +inf when nothing lies
    above the map's mean."""
    s = np.asarray(attention_map, dtype=np.float64)
    if s.ndim != 2:
        raise ValueError(f"an attention map must be 2-D [rows, cols], got shape {s.shape}")
    b = np.maximum(s - s.mean(), 0.0)
    total = b.sum()
    if total <= 0:
        return float("inf")
    labelled, n = ndimage.label((b > threshold).astype(np.int32), structure=np.ones((3, 3)))
    shares = [b[labelled == i].sum() / total for i in range(1, n + 1)]
    return float(-sum(p * np.log(p) for p in shares if p > 0))


def item_votes(attn_sum: np.ndarray, entropy: np.ndarray, per_item_top: int = PER_ITEM_TOP) -> np.ndarray:
    """One item's votes [L, H] (0/1): the ``per_item_top`` heads of lowest finite spatial entropy among those above
    the value elbow of ``attn_sum`` [L, H]; entropies equal within overlap.SCORE_TIE of the largest finite one tie
    (on the toy 6-16 heads per item sit at an entropy of 0 up to float noise) and go to the lower flat index."""
    above = value_elbow(attn_sum)
    flat = np.where(above, np.asarray(entropy, dtype=np.float64), np.inf).ravel()
    order = ranking(flat, descending=False)
    chosen = [i for i in order[:per_item_top] if np.isfinite(flat[i])]
    votes = np.zeros(flat.size)
    votes[chosen] = 1.0
    return votes.reshape(np.shape(attn_sum))


def image_grid_maps(lm, item) -> np.ndarray:
    """[L, H, rows, cols]: the last prompt token's attention to each image token, on the image-token grid."""
    batch = one_batch(lm, item)
    try:
        positions, (rows, cols) = lm.adapter.image_token_grid(batch.inputs, 0, 0)
    except NotImplementedError as error:
        raise ValueError(f"localization needs the image-token grid, and {error}") from None
    if rows * cols < 2:
        raise ValueError(
            f"localization: a {item.kind!r} item's image is {rows} x {cols} token(s); a spatial entropy needs a map"
        )
    keys = torch.zeros(batch.inputs["input_ids"].shape[1], dtype=torch.bool)
    keys[positions] = True
    att = attention_rows(lm, batch.inputs, batch.last_prompt_mask[0], keys)  # weights [L, H, 1, K]
    index = torch.searchsorted(att.keys, positions.cpu())  # grid cell -> column of att.weights
    maps = att.weights[:, :, 0, index]  # [L, H, rows * cols], row-major
    return maps.reshape(*maps.shape[:2], rows, cols).double().numpy()


def localization_per_item(lm, items) -> dict[str, np.ndarray]:
    """Per item [N, L, H]: ``attn_sum`` (criterion 1), ``entropy`` (criterion 2, +inf below the elbow, as theirs)
    and ``above`` (the value elbow's selection)."""
    sums, entropies, aboves = [], [], []
    for item in need_items(items, "localization"):
        maps = image_grid_maps(lm, item)
        attn_sum = maps.sum((2, 3))
        above = value_elbow(attn_sum)
        entropy = np.full(attn_sum.shape, np.inf)
        for layer, head in zip(*np.nonzero(above)):
            entropy[layer, head] = spatial_entropy(maps[layer, head])
        sums.append(attn_sum)
        entropies.append(entropy)
        aboves.append(above)
    return {"attn_sum": np.stack(sums), "entropy": np.stack(entropies), "above": np.stack(aboves)}


def localization_votes(lm, items, per_item_top: int = PER_ITEM_TOP) -> dict[str, np.ndarray]:
    """{"score": [N, L, H]}: each item's votes (item_votes), 1 for its ``per_item_top`` lowest-entropy heads above
    the attention-sum elbow."""
    parts = localization_per_item(lm, items)
    votes = [item_votes(s, e, per_item_top) for s, e in zip(parts["attn_sum"], parts["entropy"])]
    return {"score": np.stack(votes)}


def localization_score(lm, items, per_item_top: int = PER_ITEM_TOP) -> np.ndarray:
    """Selection frequency [L, H]: the share of items in which the head is among the ``per_item_top`` lowest-entropy
    heads above the attention-sum elbow."""
    return mean_score(localization_votes(lm, items, per_item_top))
