"""The published methods' per-item scores through the result cache (computation "methods"), on the project's strips.

    items = method_items(40, seed=0)                              # strips of cm / co x ord / ref, interleaved
    run = method_run(lm, "gaze", 40, 0, cache)                    # per-item arrays, cached in chunks of items
    score = method_score(lm, "gaze", 40, 0, cache)                # [L, H]: PER_ITEM's combine of the run

The items interleave the four corpus x query strip kinds (item i is kind i mod 4, the (i // 4)-th strip of it), so
the first n items of a larger run are the n items of a smaller one and a larger run reuses a smaller one's full
chunks. The key holds the method's name and parameters, the corpora, the model, dtype, device kind and the code of
this module, which builds the items (method_items) and imports every method's module (computation_key); a rerun of
notebook 08 reads the scores back.
"""

import math

import numpy as np

from helpers.engine.item import Item
from helpers.engine.model_files import model_identity
from helpers.measures.methods import PER_ITEM, check_method
from helpers.stimuli.corpora import corpus_key, items_of
from helpers.stimuli.design import CORPORA, QUERIES
from helpers.storage.cache import ResultCache, computation_key

# the items in words, for a saved head-set's provenance (the key holds the code that builds them instead)
ITEMS = "strip_<query> of each corpus x query, interleaved (item i: kind i mod 4, its (i // 4)-th strip)"
STRIP_KINDS = tuple((corpus, f"strip_{query}") for corpus in CORPORA for query in QUERIES)


def method_items(n_items: int, seed: int) -> list[Item]:
    """The first `n_items` strips, interleaved over corpus x query (prefix-stable in n_items)."""
    if n_items < 1:
        raise ValueError(f"n_items={n_items} must be >= 1")
    per_kind = math.ceil(n_items / len(STRIP_KINDS))
    lists = [items_of(kind, corpus, per_kind, seed) for corpus, kind in STRIP_KINDS]
    return [lists[i % len(STRIP_KINDS)][i // len(STRIP_KINDS)] for i in range(n_items)]


def method_run(lm, name: str, n_items: int, seed: int, cache: ResultCache, chunk: int = 8, **params) -> dict:
    """PER_ITEM[name]'s per-item arrays of the first `n_items` strips (method_items), cached per chunk of items
    under "methods", keyed by the method's name and `params` (its keyword parameters)."""
    per_item, _ = PER_ITEM[check_method(name)]
    key = computation_key(
        **model_identity(lm),
        corpus=[corpus_key(c) for c in CORPORA],
        params={"method": name, "params": params, "seed": seed},
        code_module=__name__,
    )

    def compute(start: int, stop: int) -> dict:
        return per_item(lm, method_items(n_items, seed)[start:stop], **params)

    return cache.cached_chunks("methods", key, n_items, chunk, compute)


def method_score(lm, name: str, n_items: int, seed: int, cache: ResultCache, chunk: int = 8, **params) -> np.ndarray:
    """[L, H]: the method's score over the first `n_items` strips (PER_ITEM's combine of method_run)."""
    _, combine = PER_ITEM[check_method(name)]
    return combine(method_run(lm, name, n_items, seed, cache, chunk, **params))
