"""How much two head rankings agree: top-k sets, overlap, half-split noise ceilings, top-k curves.

Scores are arrays over heads, `[L, H]` (one setting's mean score) or `[N, L, H]` (per item); a head-set
is a bool mask `[L, H]`. Scores equal within SCORE_TIE of the largest |score| are ties (float noise cannot
order them: heads tied at an entropy of 0 differ by ~1e-16), and ties are broken by the lower flat head
index (layer-major), so results are deterministic and the same on every machine.
"""

from itertools import combinations

import numpy as np
import pandas as pd

from helpers.stimuli.design import parse_setting

SCORE_TIE = 1e-6  # relative to the largest |score|: float32 scores carry ~1e-7 of relative noise


def tie_keys(values: np.ndarray) -> np.ndarray:
    """Flat rank keys of `values`: finite values on a grid of SCORE_TIE x max |value|, so values that close get one
    key (a tie); infinite and NaN values kept as they are."""
    flat = np.asarray(values, dtype=np.float64).ravel()
    finite = np.isfinite(flat)
    scale = float(np.abs(flat[finite]).max()) if finite.any() else 0.0
    quantum = SCORE_TIE * scale if scale > 0 else 1.0
    return np.where(finite, np.round(flat / quantum), flat)


def ranking(values: np.ndarray, descending: bool = True) -> np.ndarray:
    """Flat indices of `values` in rank order: ties (`tie_keys`) go to the lower flat index. Infinite values keep
    their place at the ends."""
    keys = tie_keys(values)
    return np.lexsort((np.arange(keys.size), -keys if descending else keys))


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Flat top-k of `scores` [L, H] -> bool mask [L, H] (ties: `ranking`)."""
    flat = np.asarray(scores, dtype=np.float64).ravel()
    if not 1 <= k <= flat.size:
        raise ValueError(f"k={k} is not allowed: use 1..{flat.size} (the number of heads)")
    order = ranking(flat)  # highest score first, ties to the lowest index
    mask = np.zeros(flat.size, dtype=bool)
    mask[order[:k]] = True
    return mask.reshape(np.shape(scores))


def top_k_per_layer(scores: np.ndarray, k_per_layer: int) -> np.ndarray:
    """The top `k_per_layer` heads of every layer of `scores` [L, H] -> bool mask [L, H]."""
    scores = np.asarray(scores)
    return np.stack([top_k(row[None], k_per_layer)[0] for row in scores])


def overlap(a: np.ndarray, b: np.ndarray) -> int:
    """|A ∩ B| of two head-set masks."""
    return int(np.logical_and(a, b).sum())


def overlap_matrix(mean_scores: dict[str, np.ndarray], k: int) -> pd.DataFrame:
    """Top-k overlap between every pair of settings (Figure 2)."""
    sets = {name: top_k(s, k) for name, s in mean_scores.items()}
    names = list(sets)
    return pd.DataFrame([[overlap(sets[a], sets[b]) for b in names] for a in names], index=names, columns=names)


def changed_factor(a: str, b: str) -> str | None:
    """'corpus', 'query' or 'source' when settings a and b differ in exactly that factor, else None."""
    sa, sb = parse_setting(a), parse_setting(b)
    diff = [f for f in ("corpus", "query", "source") if getattr(sa, f) != getattr(sb, f)]
    return diff[0] if len(diff) == 1 else None


def one_factor_pairs(matrix: pd.DataFrame) -> pd.DataFrame:
    """Every pair of settings that differ in one factor, with its overlap."""
    rows = [
        {"a": a, "b": b, "factor": changed_factor(a, b), "overlap": int(matrix.loc[a, b])}
        for a, b in combinations(matrix.index, 2)
        if changed_factor(a, b)
    ]
    return pd.DataFrame(rows, columns=["a", "b", "factor", "overlap"])


def split_halves(n_items: int, n_splits: int, seed: int) -> np.ndarray:
    """`n_splits` random half-splits of items 0..n-1 -> index array [n_splits, 2, n // 2]."""
    if n_items < 2:
        raise ValueError(f"n_items={n_items}: a half-split needs at least 2 items")
    rng = np.random.default_rng(seed)
    half = n_items // 2
    return np.stack([rng.permutation(n_items)[: 2 * half].reshape(2, half) for _ in range(n_splits)])


def half_split_overlaps(
    item_scores_a: np.ndarray, item_scores_b: np.ndarray, k: int, splits: np.ndarray
) -> np.ndarray:
    """Overlap of A's top-k on one half of the items with B's top-k on the other half, per split.

    With A == B this is the noise ceiling of a setting (two halves of the same data agree this much);
    with A != B it is the cross-setting overlap at the same data size. -> [n_splits]
    """
    return np.array(
        [overlap(top_k(item_scores_a[h1].mean(0), k), top_k(item_scores_b[h2].mean(0), k)) for h1, h2 in splits]
    )


def ceiling_table(
    item_scores: dict[str, np.ndarray], pairs: list[tuple[str, str]], k: int, n_splits: int, seed: int
) -> pd.DataFrame:
    """Table 20: per pair, overlap at half the items (mean, 2.5/97.5 percentiles over the splits), the
    geometric mean of the two settings' half-split ceilings, and overlap / ceiling."""
    n = min(len(s) for s in item_scores.values())
    splits = split_halves(n, n_splits, seed)
    ceiling = {
        name: half_split_overlaps(s[:n], s[:n], k, splits).mean()
        for name, s in item_scores.items()
        if any(name in p for p in pairs)
    }
    rows = []
    for a, b in pairs:
        o = half_split_overlaps(item_scores[a][:n], item_scores[b][:n], k, splits)
        ceil = float(np.sqrt(ceiling[a] * ceiling[b]))
        rows.append(
            {
                "what changes": changed_factor(a, b) or "several",
                "pair": f"{a} vs {b}",
                "shared": o.mean(),
                "p2.5": np.percentile(o, 2.5),
                "p97.5": np.percentile(o, 97.5),
                "ceiling": ceil,
                "fraction": o.mean() / ceil if ceil else np.nan,
            }
        )
    return pd.DataFrame(rows)


def factor_medians(matrix: pd.DataFrame, ceilings: pd.Series, k: int) -> pd.DataFrame:
    """Table 1: median overlap when only the source, only the query or only the corpus changes, and the
    range of the half-split agreement (two halves of the same data), as counts and as shares of k."""
    pairs = one_factor_pairs(matrix)
    rows = [
        {
            "comparison": f,
            "pairs": int((pairs.factor == f).sum()),
            "median overlap": float(pairs.overlap[pairs.factor == f].median()),
            "min": int(pairs.overlap[pairs.factor == f].min()),
            "max": int(pairs.overlap[pairs.factor == f].max()),
        }
        for f in ("source", "query", "corpus")
    ]
    rows.append(
        {
            "comparison": "half-split",
            "pairs": len(ceilings),
            "median overlap": float(ceilings.median()),
            "min": float(ceilings.min()),
            "max": float(ceilings.max()),
        }
    )
    table = pd.DataFrame(rows)
    table["median share of k"] = table["median overlap"] / k
    return table


def top_k_curve(scores_a: np.ndarray, scores_b: np.ndarray, ks: list[int]) -> pd.DataFrame:
    """Figure 6: shared and unique heads of two rankings as k grows."""
    rows = []
    for k in ks:
        shared = overlap(top_k(scores_a, k), top_k(scores_b, k))
        rows.append({"k": k, "shared": shared, "a_only": k - shared, "b_only": k - shared, "fraction": shared / k})
    return pd.DataFrame(rows)


def random_overlaps(scores: np.ndarray, k: int, n_draws: int, seed: int) -> np.ndarray:
    """Overlap of the top-k set with `n_draws` uniform random draws of k heads (the chance line,
    expectation k^2 / n_heads). -> [n_draws]"""
    native = top_k(scores, k).ravel()
    rng = np.random.default_rng(seed)
    return np.array([native[rng.choice(native.size, k, replace=False)].sum() for _ in range(n_draws)])


# Tables 2 / 21: the three query + source combinations of earlier work, and every combination measured against them
NATIVE_COMBINATIONS = ("ord-last", "ref-qsp", "ref-out")
COMBINATIONS = ("ord-last", "ord-qsp", "ord-out", "ref-last", "ref-qsp", "ref-out")


def crossover_overlaps(item_scores: dict[str, np.ndarray], corpus: str, k: int, n_sample: int) -> pd.DataFrame:
    """Tables 2 / 21: each query + source combination's top-k from its scores on the first `n_sample` strips of
    `corpus` (the crossover sample) against the native sets' top-k from all strips (`item_scores` {setting:
    [N, L, H]}): shared heads per native set, and `own native` the combination's overlap with its own native set
    (empty for a combination that has none), the agreement of one combination across the two samples."""
    natives = {n: top_k(item_scores[f"{corpus}-{n}"].mean(0), k) for n in NATIVE_COMBINATIONS}
    rows = []
    for c in COMBINATIONS:
        sample = top_k(item_scores[f"{corpus}-{c}"][:n_sample].mean(0), k)
        shared = {f"native {n}": overlap(sample, head_set) for n, head_set in natives.items()}
        rows.append({"combination": c, "strips": n_sample, **shared, "own native": shared.get(f"native {c}")})
    return pd.DataFrame(rows).astype({"own native": "Int64"})
