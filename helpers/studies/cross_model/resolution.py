"""How finely notebook 06's numbers resolve, per model: the resolution table (issue 43).

A table printed at three decimals hides effects below 0.0005, and a toy that answers with P = 1 gives
random sets that barely vary (z capped, SD 0.000). Per model, from the run's own results at full float
precision (never the rounded CSVs):

- the causal cells (S's mean and the random sets' mean of every NCS / CERS run 06 makes, per setting) and
  how many of them print as 0.000;
- per setting with R >= 2 random sets, their SD (of the set means), for the NCS runs (image hidden, Table 19;
  a cell hidden, Table 16's NCS_grid) and the CERS runs (Table 16's symmetric CERS): how many print as
  0.000 and the median;
- how many z of S against its random sets reach helpers.measures.stats.Z_CAP;
- the mismatched arm's drop of every masked set (S and its draws): the mean over sets and how many print
  as 0.000;
- NCS against k and CERS against beta: monotone or not, where the run has such a sweep (06 runs one k and
  one beta: NOT_RUN);
- the single-head necessity profile (helpers.measures.necessity.single_head_profile): the heads whose
  hiding alone from the image drops P(correct) by more than MIN_EFFECT, and the largest single-head NCS.

    results[name]["single head"] = single_head_run(lm, corpus, sizes.single_head_items(P), seed, cache)
    row = resolution_row(results[name], contrasts.get(name))
"""

import numpy as np
import pandas as pd

from helpers.measures.necessity import single_head_profile
from helpers.measures.stats import against_random
from helpers.measures.verdicts import MIN_EFFECT

DIGITS = 3  # the tables' float_format "%.3f"
# The measure family of every per-item run 06 keeps ([N, 1 + R]: S, then its random sets)
MEASURE_KINDS = {"ncs": "NCS", "NCS_grid": "NCS", "cers": "CERS", "symmetric CERS": "CERS"}
NOT_RUN = "not run in 06"
PROBE_COLUMNS = ("largest layer share", "clean log-odds median", "random k NCS SD", "random k log-odds SD")


def prints_as_zero(values, digits: int = DIGITS) -> np.ndarray:
    """Bool, per value: it prints as 0.000 (or -0.000) at `digits` decimals, as the tables write it."""
    values = np.asarray(values, dtype=float)
    return np.array([float(f"{v:.{digits}f}") == 0.0 for v in values.ravel()], dtype=bool).reshape(values.shape)


def causal_cells(runs: dict, contrasts: dict | None = None) -> list[dict]:
    """One row per (setting, measure) of the per-item runs: `runs` {setting: {"ncs", "cers": [N, 1 + R], ...}}
    (helpers.studies.cross_model.runs.causal_runs) and `contrasts` {setting: {"NCS_grid", "symmetric CERS"}}
    (region_contrast_runs; None or {} where the model was not scored). Each row: setting, measure, family,
    R, S and the random mean, the random SD (NaN for R = 1), z and whether it is capped (NaN / False for
    R = 1), as helpers.measures.stats.against_random gives them."""
    rows = []
    for source in (runs, contrasts or {}):
        for setting, measures in source.items():
            for measure, values in measures.items():
                if measure not in MEASURE_KINDS:
                    continue
                values = np.asarray(values, dtype=float)
                r = against_random(values[:, 0], values[:, 1:])
                rows.append(
                    {"setting": setting, "measure": measure, "family": MEASURE_KINDS[measure], "R": r["R"]}
                    | {"S": r["S"], "random mean": r["random mean"], "random sd": r["random sd"]}
                    | {"z": r["z"], "z capped": bool(r["z capped"])}
                )
    return rows


def zero_cells(cells: list[dict]) -> dict:
    """The causal cells (S and random mean of each row of causal_cells) and how many print as 0.000."""
    values = [row[key] for row in cells for key in ("S", "random mean")]
    zeros = int(prints_as_zero(values).sum()) if values else 0
    return {"cells": len(values), "cells at 0.000": zeros, "share at 0.000": zeros / len(values) if values else np.nan}


def sd_summary(cells: list[dict], family: str) -> dict:
    """Over the rows of `family` ("NCS" or "CERS") with R >= 2: how many, how many random SDs print as 0.000,
    and their median SD (NaN when none)."""
    sds = np.array([row["random sd"] for row in cells if row["family"] == family and row["R"] >= 2], dtype=float)
    return {
        f"{family} SD settings": int(sds.size),
        f"{family} SD at 0.000": int(prints_as_zero(sds).sum()),
        f"{family} median SD": float(np.median(sds)) if sds.size else np.nan,
    }


def capped_z(cells: list[dict]) -> dict:
    """How many z (rows with R >= 2) there are and how many reach the cap."""
    with_z = [row for row in cells if row["R"] >= 2]
    return {"z": len(with_z), "z capped": sum(row["z capped"] for row in with_z)}


def mismatched_drops(runs: dict) -> dict:
    """Per masked set (S and each draw of every setting): the mean over items of the mismatched arm's drop
    (runs[setting]["mismatched drop"]: [N, 1 + R]). Their number, their mean and how many print as 0.000."""
    means = [
        np.asarray(run["mismatched drop"], dtype=float).mean(0) for run in runs.values() if "mismatched drop" in run
    ]
    means = np.concatenate(means) if means else np.array([])
    return {
        "mismatched sets": int(means.size),
        "mismatched mean drop": float(means.mean()) if means.size else np.nan,
        "mismatched at 0.000": int(prints_as_zero(means).sum()),
    }


def monotone(values) -> str:
    """A sweep's values in the order of its parameter: "increasing", "decreasing" (each step >= 0 or <= 0, not all
    equal at DIGITS decimals), "flat" (every value prints the same) or "no"."""
    values = np.round(np.asarray(values, dtype=float), DIGITS)
    if values.size < 2:
        raise ValueError(f"a sweep needs >= 2 values, got {values.size}")
    steps = np.diff(values)
    if (steps == 0).all():
        return "flat"
    if (steps >= 0).all():
        return "increasing"
    if (steps <= 0).all():
        return "decreasing"
    return "no"


def sweep_monotone(sweep: dict | None) -> str:
    """monotone() of a sweep {parameter: value} in the parameter's order; NOT_RUN for None."""
    if sweep is None:
        return NOT_RUN
    return monotone([sweep[x] for x in sorted(sweep)])


def single_head_run(lm, corpus: str, n_items: int, seed: int, cache) -> dict:
    """The single-head necessity profile of `lm` (L * H head-sets of one head, image hidden, both NCS arms,
    through the result cache): {"ncs", "matched drop": [L, H]} and the item count."""
    return {**single_head_profile(lm, corpus, n_items, seed, cache), "items": n_items}


def single_head_summary(profile: dict | None, threshold: float = MIN_EFFECT) -> dict:
    """Heads, the heads whose matched-arm drop exceeds `threshold`, and the largest single-head NCS (with its
    layer/head); NaN where no profile was run."""
    if profile is None:
        empty = {"single-head items": 0, "heads": 0, f"heads drop > {threshold:g}": 0}
        return empty | {"largest single-head NCS": np.nan, "at (layer, head)": "-"}
    ncs, dropped = np.asarray(profile["ncs"], dtype=float), np.asarray(profile["matched drop"], dtype=float)
    layer, head = np.unravel_index(int(np.argmax(ncs)), ncs.shape)
    return {
        "single-head items": profile.get("items", 0),
        "heads": int(ncs.size),
        f"heads drop > {threshold:g}": int((dropped > threshold).sum()),
        "largest single-head NCS": float(ncs.max()),
        "at (layer, head)": f"({layer}, {head})",
    }


def probe_summary(profile: dict | None) -> dict:
    """The depth probe's columns (helpers.toy.probe.depth_profile): the largest single layer's share of the
    whole image's NCS, the median clean log-odds of the correct letter, and the SD over uniform random k-sets
    of NCS (in P) and of the matched log-odds drop; NaN where no probe was run."""
    if profile is None:
        return dict.fromkeys(PROBE_COLUMNS, np.nan)
    random = profile["random"][profile["k"]]
    values = (
        profile["largest layer share"],
        profile["clean log-odds"]["median"],
        random["ncs"]["sd"],
        random["log-odds drop"]["sd"],
    )
    return dict(zip(PROBE_COLUMNS, values))


def resolution_row(result: dict, contrasts: dict | None = None, sweeps: dict | None = None) -> dict:
    """One model's row: `result` is 06's results[name] ("runs", "audit", optionally "flagged", "spill" and
    "single head"), `contrasts` its Table 16 runs (None when it failed the audit), `sweeps` optional
    {"NCS vs k": {k: NCS}, "CERS vs beta": {beta: CERS}} (06's helpers.studies.cross_model.runs.sweeps)."""
    cells = causal_cells(result["runs"], contrasts)
    sweeps = sweeps or {}
    return (
        {"audit": result.get("audit", "-"), "flagged": result.get("flagged", ""), "spill": result.get("spill", "")}
        | zero_cells(cells)
        | sd_summary(cells, "NCS")
        | sd_summary(cells, "CERS")
        | capped_z(cells)
        | mismatched_drops(result["runs"])
        | {f"{name} monotone": sweep_monotone(sweeps.get(name)) for name in ("NCS vs k", "CERS vs beta")}
        | single_head_summary(result.get("single head"))
        | probe_summary(result.get("probe"))
    )


def resolution_table(results: dict, contrasts: dict, sweeps: dict | None = None) -> pd.DataFrame:
    """One row per model of 06's `results` (in order), failing models included (their audit column says so) and
    models without causal runs ("runs" {}: their cells are 0 and shares NaN)."""
    sweeps = sweeps or {}
    rows = [
        {"model": name, **resolution_row(result, contrasts.get(name), sweeps.get(name))}
        for name, result in results.items()
    ]
    return pd.DataFrame(rows)


def summary_sentence(table: pd.DataFrame, threshold: float = MIN_EFFECT) -> str:
    """A sentence generated from the table: the models with the fewest and most cells printed as 0.000, the
    model with the most single heads above `threshold`, and the largest single-head NCS."""
    if table.empty:
        return "No model was run."

    def who(index) -> str:
        row = table.loc[index]
        return f"{row['model']}{'' if row['audit'] == 'passes' else ' [fails its audit]'}"

    share = table["share at 0.000"].dropna()  # NaN: a model without causal runs
    if share.empty:
        text = "No model has causal cells."
    else:
        low, high = share.idxmin(), share.idxmax()
        text = (
            f"Fewest causal cells printed as 0.000: {who(low)} ({share[low]:.0%} of {table.loc[low, 'cells']}); "
            f"most: {who(high)} ({share[high]:.0%} of {table.loc[high, 'cells']})."
        )
    heads = f"heads drop > {threshold:g}"
    if table["heads"].gt(0).any():
        best, largest = table[heads].idxmax(), table["largest single-head NCS"].idxmax()
        text += (
            f" Most single heads whose hiding alone drops P(correct) by more than {threshold:g}: {who(best)} "
            f"({table.loc[best, heads]} of {table.loc[best, 'heads']}); largest single-head NCS: {who(largest)} "
            f"({table.loc[largest, 'largest single-head NCS']:.3f})."
        )
    return text
