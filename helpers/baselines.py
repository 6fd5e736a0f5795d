"""The baseline audit of the evaluation data (the paper's Table 22): clean P(correct), no intervention.

Before a head-set's CERS or NCS can mean anything, the model must solve the evaluation items in the way
the measures assume:

    oracle      the 2x2 grid with the target cell named in the prompt     expect ~1
    blank       the grid question on a blank grey image                    expect ~0.25 (chance)
    matched     the single-image MCQ whose image shows the answer          expect ~1
    mismatched  the same MCQ with an image outside the options             expect ~0.25 (chance)

P is renormalised over the four option letters. Per-item probabilities are cached in chunks of items.
"""

import numpy as np
import torch

from helpers.cache import ResultCache, code_version
from helpers.engine.loading import model_fingerprint
from helpers.engine.mcq import letter_probs
from helpers.stimuli import build_items, load_corpus

AUDIT_KINDS = {
    "oracle": "grid_oracle",
    "blank": "grid_blank",
    "matched": "single_matched",
    "mismatched": "single_mismatched",
}


@torch.no_grad()
def clean_run(
    lm, corpus: str, kind: str, n_items: int, seed: int, cache: ResultCache, batch_size: int = 16
) -> dict[str, np.ndarray]:
    """Clean letter probabilities of `n_items` items of `kind` (stimuli.KINDS): p_clean [N, 4], correct [N]."""
    corpus_obj = load_corpus(corpus)
    params = {
        "model": model_fingerprint(lm),
        "corpus": corpus,
        "kind": kind,
        "seed": seed,
        "dtype": str(lm.model.dtype),
        "code": code_version(__name__),
    }

    def compute(start, stop):
        items = build_items(kind, corpus_obj, stop, seed)[start:]
        return {"p_clean": letter_probs(lm.model, lm.processor, items).numpy(), "correct": [i.correct for i in items]}

    return cache.cached_chunks("clean", params, n_items, batch_size, compute)


def p_correct(run: dict[str, np.ndarray]) -> np.ndarray:
    """[N] each item's clean probability of its correct letter."""
    return np.take_along_axis(run["p_clean"], run["correct"][:, None], axis=1)[:, 0]


def audit(lm, corpus: str, n_items: int, seed: int, cache: ResultCache) -> dict[str, np.ndarray]:
    """Audit name -> [N] clean P(correct) on the evaluation items (AUDIT_KINDS)."""
    return {name: p_correct(clean_run(lm, corpus, kind, n_items, seed, cache)) for name, kind in AUDIT_KINDS.items()}
