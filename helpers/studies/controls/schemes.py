"""NCS of a head-set against the random sets of one of the field's control schemes (helpers/measures/
control_schemes.py). `scheme_run` is the one computation behind notebook 05's control-scheme table
(`control_scheme_table`) and the report card's --controls line (helpers.studies.protocol.card.Protocol.control_scheme),
so both draw, run and judge the same sets.

    run = scheme_run(evaluation, "bottom5", head_set, "co-ref-qsp", 20, seed=0, scores=scores)
    row = against_controls(run.values, run.distinct)     # S against the scheme's distinct random sets
"""

from dataclasses import dataclass

import numpy as np
import pandas as pd

from helpers.measures import control_schemes, verdicts
from helpers.measures.controls import against_controls, with_controls
from helpers.measures.necessity import ncs
from helpers.studies.evaluation import Evaluation


@dataclass(frozen=True)
class SchemeRun:
    """One head-set S against the random sets of one scheme."""

    sets: np.ndarray  # [n, L, H] the random sets drawn (unseeded: n_per_seed per seed, seed after seed)
    values: np.ndarray  # [N, 1 + n] NCS per item of S, then of each drawn set
    distinct: np.ndarray  # the columns of `sets` that are distinct sets (first draws): what a rank p is over
    seeds: dict  # unseeded: seeds, R per seed, and the seeds whose own sets S beats / cannot be judged against

    @property
    def heads(self) -> float:
        """The mean size of the drawn sets (a bottom5 pool smaller than k gives fewer heads than S)."""
        return float(self.sets.sum((1, 2)).mean())

    @property
    def head_spread(self) -> dict[str, float]:
        """The drawn sets' sizes: their SD, min and max (per-layer-uniform's size varies from draw to draw)."""
        sizes = self.sets.sum((1, 2))
        return {"heads sd": float(sizes.std(ddof=1)) if len(sizes) > 1 else 0.0,
                "heads min": int(sizes.min()), "heads max": int(sizes.max())}  # fmt: skip


def scheme_run(
    evaluation: Evaluation,
    scheme: str,
    head_set: np.ndarray,
    name: str,
    n_random: int,
    seed: int,
    scores: np.ndarray | None = None,
    n_per_seed: int = 1,
) -> SchemeRun:
    """S (`head_set` [L, H], named `name`: the draws' stream key) against `n_random` sets of `scheme` (unseeded:
    `n_per_seed` sets under each seed), NCS from the evaluation's cached masking runs. The layer-matched sets are
    run as drawn (notebooks 03-05's runs and the card's NCS, read back); any other scheme runs each distinct set
    once (bottom5 repeats its whole pool when the pool is small). "bottom5" needs the discovery `scores` [L, H]."""
    if scheme == "unseeded":
        per_seed = control_schemes.unseeded_sets(head_set, name, n_per_seed, seed)  # [seeds, n_per_seed, L, H]
        sets = per_seed.reshape(-1, *head_set.shape)
    else:
        sets = control_schemes.scheme_sets(scheme, head_set, name, n_random, seed, scores)
    stack = with_controls(head_set, sets)  # [1 + n, L, H]
    if scheme == "layer-matched":
        values = ncs(evaluation.mask(stack))
    else:
        unique, inverse = control_schemes.unique_sets(stack)
        values = ncs(evaluation.mask(unique))[:, inverse]
    seeds = seed_counts(values, n_per_seed) if scheme == "unseeded" else {}
    return SchemeRun(sets, values, control_schemes.distinct_columns(sets), seeds)


def seed_counts(values: np.ndarray, n_per_seed: int) -> dict:
    """The unseeded draw's spread: S (column 0 of `values` [N, 1 + seeds * n_per_seed]) against each seed's own
    `n_per_seed` sets alone, judged by the one rule (verdicts.judge)."""
    n_seeds = (values.shape[1] - 1) // n_per_seed
    calls = [
        verdicts.judge(against_controls(values[:, [0, *range(1 + j * n_per_seed, 1 + (j + 1) * n_per_seed)]])).outcome
        for j in range(n_seeds)
    ]
    return {
        "seeds": n_seeds,
        "R per seed": n_per_seed,
        "seeds beating": calls.count(verdicts.BEATS),
        "seeds not interpretable": calls.count(verdicts.NOT_INTERPRETABLE),
    }


SCHEME_COLUMNS = ("R", "distinct", "S", "random mean", "random sd", "random min", "random max", "p", "z", "z capped")


def control_scheme_table(
    evaluation: Evaluation, head_sets: dict, scores: dict, n_random: int, n_per_seed: int, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Notebook 05's control-scheme table: one row per scheme (control_schemes.SCHEMES) x setting of `head_sets`
    ({setting: [L, H]}; `scores` {setting: [L, H]} for bottom5), S against the scheme's distinct random sets, with
    the verdicts of verdicts.scheme_verdicts; and the points of its figure (every set's mean NCS)."""
    rows, points = [], []
    for scheme in control_schemes.SCHEMES:
        for setting, head_set in head_sets.items():
            run = scheme_run(evaluation, scheme, head_set, setting, n_random, seed, scores[setting], n_per_seed)
            row = against_controls(run.values, run.distinct)
            rows.append(
                {"scheme": scheme, "setting": setting, "heads": run.heads}
                | run.head_spread
                | {column: row[column] for column in SCHEME_COLUMNS}
                | run.seeds
            )
            points += [
                {"scheme": scheme, "setting": setting, "kind": "S" if i == 0 else "random", "NCS": mean}
                for i, mean in enumerate(run.values.mean(0))
            ]
    return verdicts.scheme_verdicts(pd.DataFrame(rows)), pd.DataFrame(points)
