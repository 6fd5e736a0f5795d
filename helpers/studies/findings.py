"""Sentences about this run, generated from its tables: what a notebook says after a table.

Each function takes a table as the notebook wrote it and returns one or two sentences naming the numbers
they rest on. The rule against random sets is `verdicts.versus_random` (rank p, Holm-adjusted across the
table's rows where `holm`, at most ALPHA and an effect of at least MIN_EFFECT); nothing here is written by
hand about a result.
"""

import numpy as np
import pandas as pd

from helpers.measures.stats import holm
from helpers.studies.verdicts import (
    ALPHA,
    BEATS,
    BELOW_MINIMUM,
    MIN_EFFECT,
    PASS,
    exceeds,
    holm_floor,
    versus_random,
)


def _names(settings: list[str]) -> str:
    return ", ".join(settings) if settings else "none"


def _outcomes(table: pd.DataFrame, p, s_column: str) -> list[str]:
    effect = (table[s_column] - table["random mean"]).to_numpy()
    return [versus_random(pi, ei) for pi, ei in zip(p, effect)]


def versus_random_sentence(
    table: pd.DataFrame, measure: str, name_column: str = "setting", s_column: str = "S", holm_rows: bool = True
) -> str:
    """Which rows' S beats its random sets (columns `s_column`, random mean, p): unadjusted and, where
    `holm_rows`, Holm-adjusted across the rows; rows at p <= ALPHA with an effect below MIN_EFFECT named."""
    names = table[name_column].astype(str).tolist()
    raw = _outcomes(table, table["p"].to_numpy(), s_column)
    beats = [n for n, o in zip(names, raw) if o == BEATS]
    below = [n for n, o in zip(names, raw) if o == BELOW_MINIMUM]
    text = (
        f"This run: {len(beats)} of {len(table)} {measure} rows beat their random sets (rank p <= {ALPHA:g} and "
        f"S - random mean >= {MIN_EFFECT:g}): {_names(beats)}."
    )
    if below:
        text += f" {len(below)} more reach p <= {ALPHA:g} with an effect below {MIN_EFFECT:g}: {_names(below)}."
    if holm_rows:
        adjusted = _outcomes(table, holm(table["p"].to_numpy()), s_column)
        held = [n for n, o in zip(names, adjusted) if o == BEATS]
        floor = min(1.0, len(table) / (table["R"].max() + 1))
        text += f" After Holm across the {len(table)} rows (smallest possible {floor:.3f}): {_names(held)}."
    return text


def generic_damage_sentence(table: pd.DataFrame) -> str:
    """Which generic-damage sets give an NCS of at least MIN_EFFECT, beside the discovered set's."""
    rows = table.set_index("head-set")
    others = rows.drop(index="discovered")
    necessary = [f"{name} {value:.3f}" for name, value in others["NCS"].items() if exceeds(value)]
    return (
        f"This run: the discovered set's NCS is {rows.loc['discovered', 'NCS']:.3f}; {len(necessary)} of "
        f"{len(others)} generic-damage sets reach NCS >= {MIN_EFFECT:g}: {_names(necessary)}."
    )


def split_agreement_sentence(table: pd.DataFrame) -> str:
    """The half-split agreement of Table 1 against the factor changes, per 100 of the top-k."""
    share = table.set_index("comparison")["median share of k"] * 100
    factors = ", ".join(f"{c} {share[c]:.1f}" for c in ("source", "query", "corpus"))
    return f"This run, median overlap per 100 of the top-k: {factors}; half-split {share['half-split']:.1f}."


def per_model_sentence(table: pd.DataFrame) -> str:
    """Table 19: per model, which COCO sets beat their random sets (rank p of that model's rows, no Holm)."""
    parts = []
    for model, rows in table.groupby("model", sort=False):
        rows = rows.rename(columns={"NCS": "S"})
        effect = rows["S"] - rows["random mean"]
        beats = [s for s, p, e in zip(rows.setting, rows.p, effect) if versus_random(p, e) == BEATS]
        parts.append(f"{model} ({rows.audit.iloc[0]}): {_names(beats)}")
    return (
        f"This run, sets whose NCS beats its random sets (rank p <= {ALPHA:g} and effect >= "
        f"{MIN_EFFECT:g}) per model: " + "; ".join(parts) + "."
    )


def methods_validation_sentence(table: pd.DataFrame) -> str:
    """Notebook 08's methods table: which methods' top-k sets beat their random sets on NCS and on CERS, against
    layer-matched and any-layer sets (Holm-adjusted rank p across the tested methods and the effect S - random
    mean, by versus_random), which reach p <= ALPHA with too small an effect, and their overlap with co-ref-qsp."""
    refused = table[table["kind"] == "refused"]["method"].tolist() if "kind" in table else []
    tested = table[table["kind"] != "refused"] if "kind" in table else table
    parts = []
    for measure in ("NCS", "CERS"):
        for control, prefix, r_column in (
            ("layer-matched", measure, "R"),
            ("any-layer", f"{measure} any-layer", "R any-layer"),
        ):
            p = tested[f"{prefix} p Holm"].to_numpy(dtype=float)
            effect = (tested[f"{measure} S"] - tested[f"{prefix} random"]).to_numpy(dtype=float)
            ran = np.isfinite(p)
            outcomes = [versus_random(pi, ei) if ok else None for pi, ei, ok in zip(p, effect, ran)]
            names = tested["method"].tolist()
            beats = [n for n, o in zip(names, outcomes) if o == BEATS]
            below = [n for n, o in zip(names, outcomes) if o == BELOW_MINIMUM]
            floor = holm_floor(int(tested[r_column].max()), int(ran.sum()))
            text = f"{measure} vs {control} (floor {floor:.3f}): {_names(beats)}"
            if below:
                text += f" (p <= {ALPHA:g} with an effect below {MIN_EFFECT:g}: {_names(below)})"
            parts.append(text)
    overlap = tested.set_index("method")["overlap with co-ref-qsp per 100"]
    sentence = (
        f"This run, of {len(tested)} methods' top-k sets, those that beat their random sets (Holm-adjusted rank "
        f"p <= {ALPHA:g} across the methods and S - random mean >= {MIN_EFFECT:g}): " + "; ".join(parts) + ". "
        f"Heads shared with co-ref-qsp's set, per 100 of k: median {overlap.median():.0f}, most {overlap.max():.0f} "
        f"({overlap.idxmax()})."
    )
    if refused:
        sentence += f" Refused on this model or these strips: {_names(refused)}."
    return sentence


def holm_reach_sentence(stats: pd.DataFrame, n_random: dict[str, int], needed: int) -> str:
    """Notebook 08: the smallest Holm-adjusted rank p any method can reach per control (the `stats` rows tested per
    measure and control, `n_random`: control -> R), and `needed`, the least R at which Holm reaches ALPHA."""
    parts, blocked = [], []
    for (measure, control), rows in stats.groupby(["measure", "control"], sort=False):
        floor = holm_floor(n_random[control], len(rows))
        parts.append(f"{measure} vs {control} {floor:.3f} ({len(rows)} methods, R = {n_random[control]})")
        if floor > ALPHA:
            blocked.append(f"{measure} vs {control}")
    text = f"This run, the smallest Holm-adjusted rank p any method can get: {'; '.join(parts)}."
    if blocked:
        text += (
            f" Above {ALPHA:g}, so no method can pass under Holm there ({_names(blocked)}), whatever its sets do; "
            f"Holm across these methods can reach {ALPHA:g} from R = {needed} random sets on."
        )
    else:
        text += f" Holm across these methods can reach {ALPHA:g} from R = {needed} random sets on."
    return text


def methods_ceiling_sentence(matrix: pd.DataFrame, k: int) -> str:
    """Notebook 08's overlap matrix (rows: methods, then "half-split ceiling"; columns: methods and settings): each
    method's half-split ceiling beside its largest overlap with another column, and the methods whose largest
    overlap with another method or setting reaches their own ceiling (as close to it as to a second half of their
    own strips)."""
    table = matrix.set_index("method")
    ceiling = table.loc["half-split ceiling"]
    methods = [m for m in table.index if m != "half-split ceiling"]
    parts, reached = [], []
    for method in methods:
        others = table.loc[method].drop(method)
        nearest = others.idxmax()
        parts.append(f"{method} {ceiling[method]:.1f} / {others[nearest]:.0f} ({nearest})")
        if np.isfinite(ceiling[method]) and others[nearest] >= ceiling[method]:
            reached.append(method)
    settings = ceiling.drop(methods)
    return (
        f"This run, top-{k}: each method's half-split ceiling / its largest overlap with another method or setting: "
        + "; ".join(parts)
        + f". The settings' ceilings: median {settings.median():.1f} (range {settings.min():.1f}-"
        f"{settings.max():.1f}). Methods whose largest overlap reaches their own ceiling: {_names(reached)}."
    )


def methods_damage_sentence(table: pd.DataFrame) -> str:
    """Notebook 08's methods table: whose set is more necessary than every generic-damage set (the card's verdict:
    NCS lower bound at least MIN_EFFECT above the largest generic-damage NCS), and the largest generic-damage NCS."""
    tested = table[table["kind"] != "refused"].set_index("method")
    passed = tested.index[tested["damage verdict"] == PASS].tolist()
    worst = tested["damage NCS max"].idxmax()
    return (
        f"This run, generic damage at each method's k: {len(passed)} of {len(tested)} methods' sets are more "
        f"necessary (NCS lower bound >= {MIN_EFFECT:g} above every generic-damage set's NCS): {_names(passed)}. The "
        f"largest generic-damage NCS: {tested.loc[worst, 'damage NCS max']:.3f} "
        f"({tested.loc[worst, 'damage set of max']}, beside {worst}'s set)."
    )
