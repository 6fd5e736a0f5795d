"""Do the published methods' top-k sets pass the paper's tests? Notebook 08's NCS and CERS of each method's set
against layer-matched and any-layer random sets (notebooks 03 and 04's measures, Holm within the published methods
and apart within the causal references: helpers.measures.methods.holm_family; the verdict by verdicts.judge), its
generic damage (notebook 05's Table 12, the report card's verdict), and the methods table that puts them beside each
method's overlap with co-ref-qsp and its half-split ceiling.

Head-sets are bool [L, H]; per-item values [N, 1 + R] (S, then its random sets).
"""

import numpy as np
import pandas as pd

from helpers.measures import streams
from helpers.measures.control_schemes import distinct_columns
from helpers.measures.controls import any_layer_sets, layer_matched_sets, spill_note, with_controls, with_effect
from helpers.measures.methods import CAUSAL_REFERENCES, holm_family
from helpers.measures.necessity import ncs
from helpers.measures.overlap import overlap
from helpers.measures.stats import holm
from helpers.measures.steering import cers
from helpers.measures.verdicts import damage_verdict, judge
from helpers.studies.evaluation import Evaluation

METHOD_MEASURES = ("NCS", "CERS")
METHOD_CONTROLS = ("layer-matched", "any-layer")


def per_item(evaluation: Evaluation, measure: str, sets: np.ndarray) -> np.ndarray:
    """[N, n]: NCS (notebook 04's masking run) or CERS (03's steering run) of `sets` [n, L, H] per item."""
    return ncs(evaluation.mask(sets)) if measure == "NCS" else cers(evaluation.steer(sets))


def validation_stats(
    evaluation: Evaluation, sets: dict, k: int, n_random: int, n_random_any: int, seed: int
) -> pd.DataFrame:
    """One row per method x measure x control: S ({method: top-k set [L, H]}) against R layer-matched sets of the
    method (stream "methods/layer-matched/<method>", spilling to the nearest layers where a layer has no room) and
    against R_any any-layer sets of k heads that every method shares (stream "methods/any-layer"), with the effect's
    t-interval, the rank p Holm-adjusted within its Holm family (methods.holm_family) per measure and control, and the
    verdict (verdicts.judge on the Holm p, at most ALPHA passing as everywhere)."""
    shape = (len(evaluation.lm.adapter.candidate_layers), evaluation.lm.adapter.n_heads)  # (L, H)
    any_sets = any_layer_sets(shape, k, n_random_any, streams.stream(seed, "methods/any-layer"))
    any_values = {measure: per_item(evaluation, measure, any_sets) for measure in METHOD_MEASURES}  # [N, R_any]
    rows = []
    for name, head_set in sets.items():
        stream = streams.stream(seed, "methods/layer-matched/{method}", method=name)
        controls = layer_matched_sets(head_set, n_random, stream, spill=True)
        distinct = (distinct_columns(controls), distinct_columns(any_sets))  # per control, as METHOD_CONTROLS
        for measure in METHOD_MEASURES:
            values = per_item(evaluation, measure, with_controls(head_set, controls))  # [N, 1 + R]
            any_layer = np.concatenate([values[:, :1], any_values[measure]], axis=1)  # [N, 1 + R_any]
            for control, against, columns in zip(METHOD_CONTROLS, (values, any_layer), distinct):
                row = with_effect(against, columns)
                rows.append({"method": name, "measure": measure, "control": control, **row})
    stats = pd.DataFrame(rows)
    stats.insert(1, "Holm family", [holm_family(name) for name in stats["method"]])
    groups = stats.groupby(["Holm family", "measure", "control"])["p"]
    stats["p Holm"] = groups.transform(lambda p: holm(p.to_numpy()))
    n_tests = groups.transform("size")
    stats["verdict"] = [judge(row, "p Holm", int(n)).outcome for row, n in zip(stats.to_dict("records"), n_tests)]
    return stats


def damage_tables(evaluation: Evaluation, sets: dict, stats: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """(Table 12 of every method's set, one block per method; {method: the largest generic-damage NCS, its set and
    the card's verdict (verdicts.damage_verdict) on S's NCS lower bound from `stats`}."""
    tables, worst_of = [], {}
    for name, head_set in sets.items():
        table = evaluation.generic_damage(head_set)
        s_low = stats[(stats.method == name) & (stats.measure == "NCS")]["S low"].iloc[0]
        verdict = damage_verdict(name, s_low, table, audits=[])
        others = table[table["damage set"] != "discovered"]
        worst = others.loc[others["NCS"].idxmax()]
        worst_of[name] = {
            "damage NCS max": worst["NCS"],
            "damage set of max": worst["damage set"],
            "damage verdict": verdict.verdict,
        }
        tables.append(table.assign(method=name))
    damage = pd.concat(tables, ignore_index=True)
    return damage[["method", *damage.columns.drop("method")]], worst_of


def validation_table(
    sets: dict,
    k: int,
    reference: np.ndarray,
    ceilings: pd.Series,
    stats: pd.DataFrame,
    damage: dict,
    refused: dict,
    n_random: int,
    n_random_any: int,
) -> pd.DataFrame:
    """The methods table: one row per method with its k and R's, its top-k set's overlap with the `reference` set
    (co-ref-qsp's top-k) per 100 heads, its half-split ceiling (`ceilings` by column), its NCS and CERS against both
    controls (`stats`) and its generic damage (`damage`: damage_tables' second part); a refused method keeps its
    reason."""
    rows = []
    for name, head_set in sets.items():
        row = {
            "method": name,
            "kind": "causal reference" if name in CAUSAL_REFERENCES else "method",
            "overlap with co-ref-qsp per 100": 100 * overlap(head_set, reference) / k,
            "half-split ceiling": ceilings[name],
        }
        for measure in METHOD_MEASURES:
            row[f"{measure} S"] = stats[(stats.method == name) & (stats.measure == measure)]["S"].iloc[0]
            for control, prefix in zip(METHOD_CONTROLS, (measure, f"{measure} any-layer")):
                hit = stats[(stats.method == name) & (stats.measure == measure) & (stats.control == control)].iloc[0]
                row[f"{prefix} random"], row[f"{prefix} p"] = hit["random mean"], hit["p"]
                row[f"{prefix} p Holm"], row[f"{prefix} verdict"] = hit["p Holm"], hit["verdict"]
        row["layer-matched spill"] = spill_note(head_set)
        rows.append({**row, **damage[name]})
    rows += [{"method": name, "kind": "refused", "refused": reason} for name, reason in refused.items()]
    table = pd.DataFrame(rows)
    table.insert(2, "k", k)
    table.insert(3, "R", n_random)
    table.insert(4, "R any-layer", n_random_any)
    return table
