"""The baseline audit of the evaluation data (the paper's Table 22): clean P(correct), no intervention.

Before a head-set's CERS or NCS can mean anything, the model must solve the evaluation items in the way
the measures assume:

    oracle      the 2x2 grid with the target cell named in the prompt     expect ~1
    blank       the grid question on a blank grey image                    expect ~0.25 (chance)
    matched     the single-image MCQ whose image shows the answer          expect ~1
    mismatched  the same MCQ with an image outside the options             expect ~0.25 (chance)

P is renormalised over the four option letters; the per-item probabilities are helpers.measures.set_chunks.clean_run's.
"""

import numpy as np

from helpers.measures.set_chunks import clean_run
from helpers.stimuli.corpora import items_of
from helpers.storage.cache import ResultCache

AUDIT_KINDS = {
    "oracle": "grid_oracle",
    "blank": "grid_blank",
    "matched": "single_matched",
    "mismatched": "single_mismatched",
}


def audit(lm, corpus: str, n_items: int, seed: int, cache: ResultCache) -> dict[str, np.ndarray]:
    """Audit name -> [N] clean P(correct) on the evaluation items (AUDIT_KINDS), from the clean runs that
    notebooks 03-05 cache too (helpers.measures.set_chunks.clean_run)."""
    out = {}
    for name, kind in AUDIT_KINDS.items():
        p_clean = clean_run(lm, kind, corpus, n_items, seed, cache)  # [N, 4]
        correct = np.array([item.correct for item in items_of(kind, corpus, n_items, seed)])  # [N]
        out[name] = p_clean[np.arange(n_items), correct]
    return out
