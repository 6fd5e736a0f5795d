"""The statistics the paper reports, each a small function checked against known values in the tests.

- rank p of a discovered head-set among R DISTINCT random ones: (1 + #{random >= S}) / (R + 1); its floor
  is 1 / (R + 1) (.048, .010, .004 at R = 20, 100, 250). A draw that repeats a set (a pool too small for R
  distinct sets) is ranked over its distinct sets only (`against_random`'s `distinct`), so one set drawn 20
  times gives a floor of .5, not .048. A random set counts as >= S when it is within TIE_TOLERANCE below
  it, and `against_random` reduces S and the random sets with one shared mean, so a random set equal to S
  is a tie whatever the float summation order;
- Holm's step-down adjustment across the 12 settings;
- z = (S - mean_R) / sd_R (sample sd), capped at |z| <= Z_CAP (and flagged) where sd_R is about 0;
- 95% t-intervals of a mean over items, percentile bootstrap intervals (paired, over items);
- a paired t-test between two settings' per-item values; a paired one-sided test of S above the mean
  of its random sets, item by item;
- Spearman's rho between a statistic and a score across sets.
"""

import numpy as np
from scipy import stats as scipy_stats

# Values closer than this are equal: half a unit of the third decimal, the precision every table prints S
# and the random sets with. Smaller gaps are float noise (P(correct) is float32 and another machine's kernels
# move a near-zero NCS by up to ~1e-4) or invisible in the tables, so they cannot order S and a random set: a
# random value at most this far below S ties with S in the rank p (counted as at least as large), and a gap
# this small gives z = 0.
TIE_TOLERANCE = 5e-4
Z_CAP = 1e3  # |z| beyond this says only "the random sets barely vary"; it is capped and flagged


def rank_p(discovered: float, random: np.ndarray, tolerance: float = TIE_TOLERANCE) -> float:
    """(1 + #{random >= discovered - tolerance}) / (R + 1): the one-sided rank p of S among R random sets."""
    random = np.asarray(random, dtype=float).ravel()
    if random.size == 0 or np.isnan(random).any() or np.isnan(discovered):
        raise ValueError(
            f"rank_p needs a finite discovered value and >= 1 finite random values "
            f"(got {discovered!r} and {random.size} values)"
        )
    return float((1 + np.sum(random >= discovered - tolerance)) / (random.size + 1))


def holm(p_values) -> np.ndarray:
    """Holm-adjusted p-values (step-down, monotone, capped at 1), in the input's order."""
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p, kind="stable")
    m = p.size
    adjusted = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out = np.empty(m)
    out[order] = np.minimum(adjusted, 1.0)
    return out


def z_score(
    discovered: float, random: np.ndarray, cap: float = Z_CAP, tolerance: float = TIE_TOLERANCE
) -> tuple[float, bool]:
    """(z, capped): (S - mean of the random values) / their sample sd (ddof 1), clipped to [-cap, cap];
    capped is True where the clip acted (the random sd is about 0 next to the gap). A gap within
    `tolerance` is no gap: z = 0."""
    random = np.asarray(random, dtype=float).ravel()
    if random.size < 2:
        raise ValueError(f"z_score needs >= 2 random values, got {random.size}")
    sd, gap = random.std(ddof=1), discovered - random.mean()
    if abs(gap) <= tolerance:
        return 0.0, False
    if abs(gap) >= cap * sd:
        return float(np.sign(gap) * cap), True
    return float(gap / sd), False


def t_interval(values: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high): the t-interval of the mean of `values` (NaN bounds for one value)."""
    values = np.asarray(values, dtype=float).ravel()
    mean = float(values.mean())
    if values.size < 2:
        return mean, float("nan"), float("nan")
    half = scipy_stats.t.ppf(0.5 + level / 2, values.size - 1) * values.std(ddof=1) / np.sqrt(values.size)
    return mean, float(mean - half), float(mean + half)


def bootstrap_interval(
    statistic, arrays: tuple[np.ndarray, ...], n_boot: int = 2000, seed: int = 0, level: float = 0.95
) -> tuple[float, float, float]:
    """(value, low, high): `statistic(*arrays)` and its percentile bootstrap interval, resampling the
    items (the first axis, shared by all arrays: paired resampling) with replacement."""
    n = len(arrays[0])
    if any(len(a) != n for a in arrays):
        raise ValueError(f"bootstrap arrays must share their first axis; lengths {[len(a) for a in arrays]}")
    rng = np.random.default_rng(seed)
    draws = np.array([statistic(*(a[index] for a in arrays)) for index in rng.integers(0, n, size=(n_boot, n))])
    low, high = np.quantile(draws, [0.5 - level / 2, 0.5 + level / 2])
    return float(statistic(*arrays)), float(low), float(high)


def paired_t(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(mean of a - b, two-sided p) of a paired t-test over items."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    result = scipy_stats.ttest_rel(a, b)
    return float((a - b).mean()), float(result.pvalue)


def excess_over_random(discovered: np.ndarray, random: np.ndarray) -> tuple[float, float]:
    """(mean excess, one-sided p): per item, S's value minus the mean of its R random sets' values
    (discovered [N], random [N, R]); p of a one-sided t-test that the mean excess is > 0."""
    discovered, random = np.asarray(discovered, dtype=float), np.asarray(random, dtype=float)
    if random.ndim != 2 or random.shape[0] != discovered.shape[0]:
        raise ValueError(f"random must be [N, R] with N = {discovered.shape[0]} items; got {random.shape}")
    excess = discovered - random.mean(1)  # [N]
    return float(excess.mean()), float(scipy_stats.ttest_1samp(excess, 0.0, alternative="greater").pvalue)


def spearman(a, b) -> float:
    """Spearman's rank correlation of two equally long sequences (ties get average ranks)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.size < 3:
        raise ValueError(f"spearman needs two sequences of the same length >= 3, got {a.shape} and {b.shape}")
    return float(scipy_stats.spearmanr(a, b).statistic)


def random_summary(random: np.ndarray) -> dict[str, float]:
    """Summary of R random sets from per-item values [N, R]: the mean of the set means with a 95%
    t-interval over the draws, their sd, min and max."""
    set_means = np.asarray(random, dtype=float).mean(0)  # [R]
    mean, low, high = t_interval(set_means)
    return {
        "random mean": mean,
        "random low": low,
        "random high": high,
        "random sd": float(set_means.std(ddof=1)) if set_means.size > 1 else float("nan"),
        "random min": float(set_means.min()),
        "random max": float(set_means.max()),
    }


def against_random(discovered: np.ndarray, random: np.ndarray, distinct: np.ndarray | None = None) -> dict:
    """One row of "S vs. its random sets" from per-item values.

    discovered: [N] per-item values of S; random: [N, R] per-item values of R random sets; distinct: the
    columns of `random` that are distinct sets (their first draws), where a draw repeats sets: then the
    random sets' summary, p and z are over those columns only, and the row says how many ('distinct') of the
    R drawn. S's mean gets a
    95% t-interval over items (the paper's captions give t-intervals for these rows);
    the random sets as in `random_summary`; p is the rank p of S's mean among the R set means and z its
    distance from them in their sd (capped, see `z_score`). S's mean and the set means come from one
    `mean(0)` over the [N, 1 + R] array, so equal sets give equal means."""
    discovered, random = np.asarray(discovered, dtype=float), np.asarray(random, dtype=float)
    if random.ndim != 2 or random.shape[0] != discovered.shape[0]:
        raise ValueError(f"random must be [N, R] with N = {discovered.shape[0]} items; got {random.shape}")
    drawn = random.shape[1]
    if distinct is not None:
        random = random[:, np.asarray(distinct, dtype=int)]
    means = np.concatenate([discovered[:, None], random], axis=1).mean(0)  # [1 + R]
    _, s_low, s_high = t_interval(discovered)
    z, capped = z_score(means[0], means[1:]) if random.shape[1] > 1 else (float("nan"), False)
    return {
        "S": float(means[0]),
        "S low": s_low,
        "S high": s_high,
        **random_summary(random),
        "R": drawn,
        **({"distinct": random.shape[1]} if distinct is not None else {}),
        "interval": "t",
        "p": rank_p(means[0], means[1:]),
        "z": z,
        "z capped": capped,
    }
