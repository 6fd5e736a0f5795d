"""The items' clean letter probabilities, cached on disk without the head-sets, so that the S-against-random runs
of every table share one clean forward per item."""

import numpy as np
import torch

from helpers.engine.inputs import item_batch
from helpers.engine.mcq import letter_probs
from helpers.engine.model_files import model_identity
from helpers.stimuli.corpora import Item, corpus_key, items_of
from helpers.storage.cache import ResultCache, computation_key


@torch.no_grad()
def clean_probs(lm, items: list[Item]) -> np.ndarray:
    """[N, 4] P(A..D) of each item without intervention, one item per forward (as the runs see it)."""
    return torch.stack([letter_probs(lm.model, lm.processor, item_batch(lm.processor, i))[0] for i in items]).numpy()


def clean_run(lm, kind: str, corpus: str, n_items: int, seed: int, cache: ResultCache, chunk: int = 10) -> np.ndarray:
    """[N, 4] clean_probs of the first `n_items` items of `kind`, cached per chunk (keyed without head-sets)."""
    key = computation_key(
        **model_identity(lm),
        corpus=corpus_key(corpus),
        params={"kind": kind, "seed": seed},
        code_module=__name__,
    )

    def compute(start: int, stop: int) -> dict:
        return {"p_clean": clean_probs(lm, items_of(kind, corpus, n_items, seed)[start:stop])}

    return cache.cached_chunks("clean", key, n_items, chunk, compute)["p_clean"]
