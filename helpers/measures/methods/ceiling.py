"""The half-split noise ceiling of a published method: how many heads its top-k on one half of the items shares with
its top-k on the other half (notebook 02's ceiling of a setting, helpers.measures.overlap.half_split_overlaps, for a
method's per-item run and its own combine, which is not always a mean over items).

    splits = split_halves(40, 200, seed=0)                            # [n_splits, 2, 20] item indices
    shared = half_split_ceiling(run, PER_ITEM["sparsemm"][1], 11, splits)   # [n_splits]; NaN where a half scores none
"""

import warnings
from collections.abc import Callable

import numpy as np

from helpers.measures.overlap import overlap, top_k


def items_of_run(run: dict[str, np.ndarray], items: np.ndarray) -> dict[str, np.ndarray]:
    """The per-item run restricted to `items` (indices into its item axis, the first of every array)."""
    return {name: np.asarray(values)[items] for name, values in run.items()}


def half_score(run: dict[str, np.ndarray], combine: Callable, items: np.ndarray) -> np.ndarray | None:
    """combine's [L, H] score of the run's `items`, or None where those items give no finite score (the combine
    refuses them, or it averages over none of them)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a mean over an empty selection: NaN, checked below
        try:
            score = combine(items_of_run(run, items))
        except ValueError:
            return None
    return score if np.isfinite(score).all() else None


def split_scores(run: dict[str, np.ndarray], combine: Callable, splits: np.ndarray) -> list[tuple]:
    """Per half-split, (combine's score of the first half, of the second half); None for a half without one."""
    return [(half_score(run, combine, first), half_score(run, combine, second)) for first, second in splits]


def shared_across_halves(halves_a: list[tuple], halves_b: list[tuple], k: int) -> np.ndarray:
    """[n_splits]: per split, the overlap of a's top-k on the first half with b's top-k on the second half (NaN
    where either is None). With a = b it is a's half-split ceiling; with a != b on the same items, an overlap
    from disjoint halves at half the data, comparable with both ceilings (an overlap of the two columns' full-data
    sets is not: it shares the items and has twice the data)."""
    if len(halves_a) != len(halves_b):
        raise ValueError(f"{len(halves_a)} and {len(halves_b)} half-splits: the two columns need the same count")
    return np.array(
        [
            np.nan if a is None or b is None else overlap(top_k(a, k), top_k(b, k))
            for (a, _), (_, b) in zip(halves_a, halves_b)
        ],
        dtype=float,
    )


def half_split_ceiling(run: dict[str, np.ndarray], combine: Callable, k: int, splits: np.ndarray) -> np.ndarray:
    """[n_splits]: per half-split (split_halves), the overlap of the top-k of combine(first half) with the top-k of
    combine(second half); NaN for a split where either half gives no score."""
    halves = split_scores(run, combine, splits)
    return shared_across_halves(halves, halves, k)
