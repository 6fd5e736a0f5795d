"""The tables of notebook 06 (cross-model), each built from the models' runs: `results` maps a model's name to its
helpers.studies.cross_model.model_run.model_run, in the notebook's order. Per-item values are [N, 1 + R]: S, then its
random sets (one draw where R = 1); the pointing suite's are [N, 2]: S and its one draw.
"""

import numpy as np
import pandas as pd

from helpers.measures.controls import against_controls
from helpers.measures.stats import t_interval
from helpers.measures.verdicts import judge
from helpers.studies.claims import claim_rows
from helpers.studies.cross_model.resolution import resolution_table
from helpers.studies.cross_model.runs import LAST, NATIVE, QSP_OUT, TABLE19, overlap_rows, ranges

# The claims 06's runs cannot test, and why (the claims table per model)
UNTESTED_IN_06 = {
    "Holm across 12 settings": "06 masks 8 of the 12 settings, so Holm across the 12 is not computed",
    "no steering advantage": "06 steers each set against one layer-matched draw (rank p needs R >= 19)",
    "random sets span S": "06 draws no any-layer sets",
    "necessity separates, steering does not": "06 steers each set against one layer-matched draw",
    "replicates on further models": "a claim across models: 05's table reads it from Table 19 above",
}
CLAIM_COLUMNS = ["model", "audit", "claim", "paper", "this run", "holds", "detail", "rule"]
TABLE23_SETS = ("cm-ref-qsp", "ref-qspan", "co-ord-qsp")  # pointing-suite names; ref-qspan is co-ref-qsp


def baseline_audit_table(results: dict) -> pd.DataFrame:
    """Table 22: per model, the baselines' mean P(correct), the ones out of range and whether the model passes."""
    return pd.DataFrame([result["audit row"] for result in results.values()])


def second_model_table(results: dict) -> pd.DataFrame:
    """Table 19: per model and COCO setting, NCS of S against its layer-matched sets, rank p and the verdict of
    verdicts.judge (unadjusted)."""
    rows = []
    for name, result in results.items():
        for s, label in TABLE19.items():
            r = against_controls(result["runs"][s]["ncs"])
            rows.append(
                {"model": name, "audit": result["audit"], "setting": label, "k": result["k"], "NCS": r["S"]}
                | {k: r[k] for k in ("random mean", "random min", "random max", "R", "p")}
                | {"verdict": judge(r).outcome}
            )
    return pd.DataFrame(rows)


def region_contrast_models_table(results: dict) -> pd.DataFrame:
    """Table 16 per model: the region-contrast table of every model that passes its audit, the model first."""
    tables = [result["region contrast"] for result in results.values() if result["region contrast"] is not None]
    table = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=["model", "setting"])
    return table[["model", *table.columns.drop("model")]]


def further_models_table(results: dict) -> pd.DataFrame:
    """Table 8: per model, for NCS and CERS, the range of S and of its one random draw over the query-span and
    output sets (QSP_OUT), and the last-token set (LAST) with its draw."""
    rows = []
    for name, result in results.items():
        row = {"model": name, "audit": result["audit"]}
        for measure in ("ncs", "cers"):
            row |= {f"{measure} {key}": v for key, v in ranges(result["runs"], measure, QSP_OUT).items()}
            last = result["runs"][LAST][measure]  # [N, 1 + R]
            row |= {f"{measure} last S": last[:, 0].mean(), f"{measure} last random": last[:, 1].mean()}
        rows.append(row)
    return pd.DataFrame(rows)


def ood_models_table(results: dict) -> pd.DataFrame:
    """The Table 24 analogue: per model and set of QSP_OUT, CERS and NCS of S and of its one random draw."""
    rows = []
    for name, result in results.items():
        for s in QSP_OUT:
            run = result["runs"][s]
            rows.append(
                {"model": name, "audit": result["audit"], "setting": s}
                | {"CERS": run["cers"][:, 0].mean(), "CERS random": run["cers"][:, 1].mean()}
                | {"NCS": run["ncs"][:, 0].mean(), "NCS random": run["ncs"][:, 1].mean()}
            )
    return pd.DataFrame(rows)


def overlaps_table(results: dict, n_draws: int, seed: int) -> pd.DataFrame:
    """Figure 7: per model, the native sets' pairwise overlaps and their overlap with `n_draws` uniform draws."""
    return pd.DataFrame(
        [
            {"model": name, "audit": result["audit"], **row}
            for name, result in results.items()
            for row in overlap_rows(result["means"], result["k"], n_draws, seed)
        ]
    )


def pointing_tasks_table(tasks: dict) -> pd.DataFrame:
    """Table 25: the pointing tasks, their family and what each shows and asks."""
    return pd.DataFrame([{"task": t.name, "family": t.family, "shown and asked": t.shown} for t in tasks.values()])


def pointing_audit_table(results: dict) -> pd.DataFrame:
    """Table 22 per task: every model's leak audit of every pointing task."""
    return pd.DataFrame(
        [
            {"model": name, "task": task, **row}
            for name, result in results.items()
            for task, row in result["pointing"][0].items()
        ]
    )


def pointing_task_cers_table(results: dict, tasks: dict) -> pd.DataFrame:
    """Table 26: per model and task, CERS of the ord-last set, of its layer-matched draw and the gap (a task that
    failed its audit on the model is not scored)."""
    rows = []
    for name, result in results.items():
        scores = result["pointing"][1]
        for task in tasks:
            if task not in scores:
                rows.append({"model": name, "task": task, "scored": False})
                continue
            values = scores[task]["cers"]["ord-last"]  # [N, 2]: S, its draw
            rows.append({"model": name, "task": task, "scored": True, "ord-last": values[:, 0].mean()})
            rows[-1] |= {"random": values[:, 1].mean(), "gap": values[:, 0].mean() - values[:, 1].mean()}
    return pd.DataFrame(rows)


def pointing_models_table(results: dict, tasks: dict) -> pd.DataFrame:
    """Table 27: per model, CERS of the native sets pooled over the tasks that pass the audit, the mean of their
    draws and the clean grid accuracy over those tasks."""
    rows = []
    for name, result in results.items():
        audits, scores = result["pointing"]
        row = {"model": name, "audit": result["audit"], "tasks scored": f"{len(scores)}/{len(tasks)}"}
        if scores:
            row["baseline acc"] = np.mean([audits[t]["plain accuracy"] for t in scores])
            pooled = {n: np.concatenate([scores[t]["cers"][n] for t in scores]) for n in NATIVE}  # [N tasks, 2]
            row |= {n: v[:, 0].mean() for n, v in pooled.items()}
            row["random"] = np.mean([v[:, 1].mean() for v in pooled.values()])
        rows.append(row)
    return pd.DataFrame(rows)


def ood_pooled_table(results: dict) -> pd.DataFrame:
    """Table 23: per model, CERS and NCS of three query-span sets and of their draws, pooled over the scored tasks,
    with 95% t-intervals over items."""
    rows = []
    for name, result in results.items():
        scores = result["pointing"][1]
        if not scores:
            continue
        for n in TABLE23_SETS:
            pooled = {measure: np.concatenate([scores[t][measure][n] for t in scores]) for measure in ("cers", "ncs")}
            for column, label in ((0, n), (1, f"{n} random")):
                row = {"model": name, "head set": label.replace("ref-qspan", "co-ref-qsp")}
                for measure, values in pooled.items():
                    mean, low, high = t_interval(values[:, column])
                    row |= {measure.upper(): mean, f"{measure.upper()} low": low, f"{measure.upper()} high": high}
                rows.append(row)
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=["model", "head set"])  # no model scored a task


def model_resolution_table(results: dict) -> pd.DataFrame:
    """The resolution table (helpers.studies.cross_model.resolution.resolution_table) of every model."""
    contrasts = {name: result["contrasts"] for name, result in results.items()}
    return resolution_table(results, contrasts, {name: result["sweeps"] for name, result in results.items()})


def sweeps_table(results: dict) -> pd.DataFrame:
    """Per model, co-ref-qsp's NCS against k and CERS against beta (S alone), one row per point."""
    return pd.DataFrame(
        [
            {"model": name, "sweep": sweep, "value of k or beta": x, "mean": y}
            for name, result in results.items()
            for sweep, values in result["sweeps"].items()
            for x, y in values.items()
        ]
    )


def claims_per_model_table(results: dict) -> pd.DataFrame:
    """The paper's claims tested on each model from 06's own runs (helpers.studies.claims.claim_rows), those 06
    cannot test named with the reason (UNTESTED_IN_06)."""
    table = pd.concat(
        [
            claim_rows(result["claim tables"], untested=UNTESTED_IN_06).assign(model=name, audit=result["audit"])
            for name, result in results.items()
        ],
        ignore_index=True,
    )
    return table[CLAIM_COLUMNS]
