"""Notebook 08's comparison of the field's published discovery methods (helpers/measures/methods): every method's
score on the same strips, its top-k set's overlap with the other methods and with the paper's 12 discovery settings,
the half-split noise ceiling of each, and how well each score ranks heads like exact single-head ablation.

Scores are [L, H]; a column is a method or a discovery setting; `halves` maps a column to its half-split scores,
one (first half, second half) pair per split, None for a half that gives no score.
"""

import time

import numpy as np
import pandas as pd

from helpers.engine.loading import LoadedModel
from helpers.measures.methods import CAUSAL_REFERENCES, FACTS, METHODS, PER_ITEM, rank_agreement
from helpers.measures.methods.cached import method_run
from helpers.measures.methods.ceiling import shared_across_halves, split_scores
from helpers.measures.overlap import overlap, split_halves, top_k
from helpers.storage.cache import ResultCache

CEILING = "half-split ceiling"  # the overlap table's last row and the ceilings table's column


def facts_table() -> pd.DataFrame:
    """One row per method: what it reads, and how its authors selected and validated heads (FACTS)."""
    return pd.DataFrame([{"method": name, **vars(facts)} for name, facts in FACTS.items()])


def method_scores(lm: LoadedModel, n_items: int, seed: int, cache: ResultCache) -> tuple[dict, dict, dict, dict]:
    """(runs {method: per-item run}, scores {method: [L, H]}, seconds {method: time to compute or read back},
    refused {method: the reason}) of every method on `n_items` strips; a method that cannot serve the model or the
    strips is refused (FACTS' `needs`) and has no run or score."""
    runs, scores, seconds, refused = {}, {}, {}, {}
    for name in METHODS:
        start = time.perf_counter()
        try:
            run = method_run(lm, name, n_items, seed, cache)
            scores[name] = PER_ITEM[name][1](run)
            runs[name] = run
        except ValueError as error:
            refused[name] = str(error)
        seconds[name] = time.perf_counter() - start
    return runs, scores, seconds, refused


def half_scores(
    runs: dict, item_scores: dict, n_items: int, n_strips: int, n_splits: int, seed: int
) -> dict[str, list[tuple]]:
    """Each column's half-split scores: a method's halves of its `n_items` strips by its own combine, a setting's
    halves of its `n_strips` discovery strips (`item_scores` {setting: [N, L, H]}) by the mean."""
    method_splits = split_halves(n_items, n_splits, seed)
    setting_splits = split_halves(n_strips, n_splits, seed)
    halves = {name: split_scores(run, PER_ITEM[name][1], method_splits) for name, run in runs.items()}
    halves |= {s: [(v[a].mean(0), v[b].mean(0)) for a, b in setting_splits] for s, v in item_scores.items()}
    return halves


def ceilings_table(halves: dict, methods: list, n_items: int, n_strips: int, k: int) -> pd.DataFrame:
    """One row per column: its half-split ceiling (the top-k its two halves share, mean over the splits that give
    both halves a score), the items per half and how many splits count."""
    shared = {name: shared_across_halves(h, h, k) for name, h in halves.items()}  # [n_splits] each, NaN: no score
    return pd.DataFrame(
        {
            "column": list(shared),
            "items per half": [n_items // 2 if c in methods else n_strips // 2 for c in shared],
            "ceiling splits": [int(np.isfinite(v).sum()) for v in shared.values()],
            CEILING: [np.nanmean(v) if np.isfinite(v).any() else np.nan for v in shared.values()],
        }
    )


def overlap_table(sets: dict, columns: dict, ceilings: pd.DataFrame) -> pd.DataFrame:
    """Methods (rows) x columns: the heads the methods' top-k sets share with each column's, and a last row of each
    column's half-split ceiling (`ceilings`: ceilings_table)."""
    matrix = pd.DataFrame({b: {a: overlap(sets[a], columns[b]) for a in sets} for b in columns}).astype(float)
    matrix.loc[CEILING] = ceilings.set_index("column")[CEILING]
    return matrix


def across_halves_table(halves: dict, methods: list, columns: list, k: int) -> pd.DataFrame:
    """Methods (rows) x columns: a method's top-k on one half against the column's top-k on the other half, mean over
    the splits: comparable with both ceilings (half the data, disjoint halves)."""
    return pd.DataFrame(
        {b: {a: np.nanmean(shared_across_halves(halves[a], halves[b], k)) for a in methods} for b in columns}
    )


def ablation_agreement_table(scores: dict, setting_scores: dict, columns: dict, k: int, seconds: dict) -> pd.DataFrame:
    """One row per score other than ablation (the methods', then the settings'): Spearman's rank correlation over
    heads with the ablation drop, its top-k's overlap with ablation's and the seconds its run took (methods)."""
    shape = next(iter(setting_scores.values())).shape  # [L, H]
    ablation = scores.get("ablation", np.full(shape, np.nan))
    rows = []
    for name, score in {**scores, **setting_scores}.items():
        if name == "ablation":
            continue
        kind = (
            "causal estimate" if name in CAUSAL_REFERENCES else "paper setting" if name in setting_scores else "method"
        )
        shared = overlap(columns[name], top_k(ablation, k)) if "ablation" in scores else np.nan
        rows.append(
            {
                "score": name,
                "kind": kind,
                "spearman with ablation": rank_agreement(score, ablation),
                f"top-{k} overlap with ablation": shared,
                "seconds": seconds.get(name, np.nan),
            }
        )
    return pd.DataFrame(rows)
