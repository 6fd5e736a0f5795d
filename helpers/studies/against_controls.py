"""S against its random sets from per-item values [N, 1 + R]: S in column 0, its random sets in the others. The rows
of the causal tables (notebooks 04, 05 and 08, the report card), by helpers.measures.stats.against_random.

    row = against_controls(ncs(exp.mask(exp.with_controls("co-ref-qsp", 20))))   # S, p, z, ... of Table 3's row
"""

import numpy as np

from helpers.measures.stats import against_random, t_interval


def against_controls(values: np.ndarray, distinct: np.ndarray | None = None) -> dict:
    """`against_random` of S (column 0) and its random sets (the other columns) of per-item values [N, 1 + R];
    `distinct`: the random columns that are distinct sets, where the draw repeats sets."""
    return against_random(values[:, 0], values[:, 1:], distinct)


def with_effect(values: np.ndarray, distinct: np.ndarray | None = None) -> dict:
    """`against_controls` and the effect: S's per-item excess over the mean of its (distinct) random sets, with
    its 95% t-interval over items."""
    random = values[:, 1:] if distinct is None else values[:, 1:][:, distinct]  # [N, R]
    effect, low, high = t_interval(values[:, 0] - random.mean(1))
    return {**against_controls(values, distinct), "effect": effect, "effect low": low, "effect high": high}
