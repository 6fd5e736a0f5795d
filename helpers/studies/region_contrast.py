"""Region-contrast necessity and symmetric CERS on the audited evaluation grid: the one computation behind
Table 6 (notebook 04: NCS_grid of the 12 settings) and Table 16 (04 on the run's model, 06 per model).

    NCS_grid       = P(c | a distractor's cell hidden from S) - P(c | the target cell hidden from S)
    symmetric CERS = helpers.measures.steering.symmetric_cers, at the evaluation's beta

The grid is leak-audited: its clean oracle and blank P(correct) (helpers.measures.baselines.audit) are
reported beside the rows with whether they lie in verdicts.AUDIT_RANGES. The largest attainable NCS_grid (the
paper gives its value, 0.716, not its recipe) is taken here as the contrast with the cell hidden from every
head of the model (S = all candidate heads), the most of a cell any set can hide; it is not a strict bound on
a subset's NCS_grid (heads left seeing a cell can move P(c) either way), so a share above 100% can occur.
"""

import numpy as np
import pandas as pd

from helpers.measures.baselines import audit
from helpers.measures.controls import with_controls
from helpers.measures.stats import against_random
from helpers.measures.steering import ncs_grid, symmetric_cers
from helpers.measures.verdicts import AUDIT_RANGES, GRID_AUDITS
from helpers.studies.evaluation import Evaluation

MEASURES = ("NCS_grid", "symmetric CERS")
ATTAINABLE = "largest attainable NCS_grid"
ROW_KEYS = ("S", "S low", "S high", "random mean", "random low", "random high", "random sd", "p", "z", "z capped")


def region_contrast_runs(evaluation: Evaluation, head_sets: dict, controls: dict) -> dict:
    """{setting: {"NCS_grid", "symmetric CERS": [N, 1 + R]}}: per item, S (`head_sets[setting]` [L, H]) then its
    random sets (`controls[setting]` [R, L, H]), a cell hidden (bias HIDE) and the set steered (the evaluation's
    beta)."""
    out = {}
    for s, head_set in head_sets.items():
        sets = with_controls(head_set, controls[s])  # [1 + R, L, H]
        out[s] = {
            "NCS_grid": ncs_grid(evaluation.hide_cells(sets)),
            "symmetric CERS": symmetric_cers(evaluation.steer(sets)),
        }
    return out


def attainable_ncs_grid(evaluation: Evaluation) -> float:
    """The mean NCS_grid of the set of every candidate head (the cell hidden from the whole model)."""
    adapter = evaluation.lm.adapter
    every_head = np.ones((1, len(adapter.candidate_layers), adapter.n_heads), dtype=bool)
    return float(ncs_grid(evaluation.hide_cells(every_head)).mean())


def grid_audit(evaluation: Evaluation) -> dict:
    """The grid's clean oracle and blank P(correct) (means over the items) and whether both lie in range."""
    values = audit(evaluation.lm, evaluation.corpus, evaluation.n_items, evaluation.seed, evaluation.cache)
    means = {name: float(values[name].mean()) for name in GRID_AUDITS}
    inside = all(AUDIT_RANGES[name][0] <= v <= AUDIT_RANGES[name][1] for name, v in means.items())
    return {**{f"grid {name}": v for name, v in means.items()}, "grid audit": "passes" if inside else "FAILS"}


def region_contrast_table(runs: dict, attainable: float, grid: dict) -> pd.DataFrame:
    """One row per setting of `region_contrast_runs`: N, R and, per measure, S with its t-interval, the random
    sets' mean (t-interval over the draws, SD), rank p and z; the largest attainable NCS_grid; the grid audit."""
    rows = []
    for s, measures in runs.items():
        first = next(iter(measures.values()))
        row = {"setting": s, "N": first.shape[0], "R": first.shape[1] - 1}
        for measure in MEASURES:
            values = measures[measure]
            result = against_random(values[:, 0], values[:, 1:])
            row |= {f"{measure} {key}": result[key] for key in ROW_KEYS}
        rows.append(row | {ATTAINABLE: attainable} | grid)
    return pd.DataFrame(rows)


def measure_columns(table: pd.DataFrame, measure: str) -> pd.DataFrame:
    """`table`'s setting, N, R, the columns of one measure without its prefix (S, p, ...), the attainable
    NCS_grid and the grid audit: the shape notebook 04's Table 6, its figure and its sentence read."""
    keep = {f"{measure} {key}": key for key in ROW_KEYS}
    other = [c for c in table.columns if not c.startswith(tuple(f"{m} " for m in MEASURES))]
    return table[[*other[:3], *keep, *other[3:]]].rename(columns=keep)
