"""Causal references: exact single-head ablation and attribution patching, with how well the second ranks heads
like the first.

- ``ablation_score``: each head's output zeroed in turn at every position (helpers.engine.head_zeroing: its slice
  of o_proj's input set to 0), the drop in P(correct) = P_clean - P_zeroed, mean over items. One item's heads run as
  copies of the item in a batch, ``heads_per_forward`` at a time.
- ``attribution_score``: attribution patching, the first-order estimate of the same drop from one forward and one
  backward per item: sum over positions and the head's dims of dP/d(head output) * (head output)
  (helpers.engine.head_grads), mean over items.
- ``rank_agreement``: Spearman's rank correlation, over heads, of any score [L, H] with the ablation drop.

P(correct) (helpers.measures.methods.common.p_correct): for MCQ items the correct letter's probability renormalised
over A-D at the last prompt row (the paper's); for strips the teacher-forced probability of the gold answer's tokens.
helpers.engine.masking's "output_zero" (at rows="all") zeroes the same outputs inside the attention function; this
module uses its own o_proj hook, which the gradient needs anyway.
"""

from __future__ import annotations

import numpy as np
import torch

from helpers.engine.head_grads import head_attributions
from helpers.engine.head_sets import expand_item
from helpers.engine.head_zeroing import zero_head_outputs
from helpers.measures.methods.common import correct_batch, mean_score, need_items, p_correct
from helpers.measures.necessity import single_heads
from helpers.measures.overlap import tie_keys
from helpers.measures.stats import TIE_TOLERANCE, spearman


@torch.no_grad()
def ablation_item(lm, item, heads_per_forward: int = 32) -> tuple[np.ndarray, float]:
    """(drop [L, H] of P(correct) when each head alone is zeroed, P_clean) for one item."""
    n_layers, n_heads = len(lm.adapter.candidate_layers), lm.adapter.n_heads
    batch = correct_batch(lm, item)
    device = lm.model.device
    inputs = {k: v.to(device) for k, v in batch.inputs.items()}
    clean = float(p_correct(lm, item, batch, lm.model(**inputs).logits)[0])
    sets = torch.from_numpy(single_heads(n_layers, n_heads))  # [L * H, L, H], layer-major
    zeroed = []
    for start in range(0, sets.shape[0], heads_per_forward):
        part = sets[start : start + heads_per_forward]
        with zero_head_outputs(lm, part):
            logits = lm.model(**expand_item(inputs, part.shape[0])).logits
        zeroed.append(p_correct(lm, item, batch, logits).float().cpu())
    return clean - torch.cat(zeroed).reshape(n_layers, n_heads).double().numpy(), clean


def ablation_per_item(lm, items, heads_per_forward: int = 32) -> dict[str, np.ndarray]:
    """Per item: "score" [N, L, H], the drop in P(correct) when each head alone is zeroed, and "p_clean" [N]."""
    parts = [ablation_item(lm, item, heads_per_forward) for item in need_items(items, "ablation")]
    return {"score": np.stack([drop for drop, _ in parts]), "p_clean": np.array([clean for _, clean in parts])}


def ablation_score(lm, items, heads_per_forward: int = 32) -> np.ndarray:
    """Mean over items of the drop in P(correct) when one head's output is zeroed [L, H] (higher = more needed)."""
    return mean_score(ablation_per_item(lm, items, heads_per_forward))


def attribution_item(lm, item) -> tuple[np.ndarray, float]:
    """(attribution patching's estimate [L, H] of the ablation drop, P_clean) for one item."""
    batch = correct_batch(lm, item)
    attributions, value = head_attributions(lm, batch.inputs, lambda logits: p_correct(lm, item, batch, logits))
    return attributions[0].double().numpy(), float(value[0])


def attribution_per_item(lm, items) -> dict[str, np.ndarray]:
    """Per item: "score" [N, L, H], attribution patching's estimate of each head's ablation drop, and "p_clean"."""
    parts = [attribution_item(lm, item) for item in need_items(items, "attribution")]
    return {"score": np.stack([value for value, _ in parts]), "p_clean": np.array([clean for _, clean in parts])}


def attribution_score(lm, items) -> np.ndarray:
    """Mean over items of attribution patching's estimate of the single-head ablation drop [L, H]."""
    return mean_score(attribution_per_item(lm, items))


def rank_agreement(score: np.ndarray, ablation: np.ndarray) -> float:
    """Spearman's rank correlation over heads of ``score`` [L, H] with the ablation drop [L, H], ties by rule: drops
    (differences in P(correct)) within stats.TIE_TOLERANCE of each other on its grid tie, so the many near-zero drops
    rank as one tie, not by float noise; scores tie as top-k ties them (overlap.tie_keys)."""
    drops = np.round(np.ravel(ablation) / (2 * TIE_TOLERANCE))
    return spearman(tie_keys(score), drops)
