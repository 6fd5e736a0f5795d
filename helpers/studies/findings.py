"""Sentences about this run, generated from its tables: what a notebook says after a table.

Each function takes a table as the notebook wrote it and returns one or two sentences naming the numbers
they rest on. The rule against random sets is `verdicts.versus_random` (rank p, Holm-adjusted across the
table's rows where `holm`, at most ALPHA and an effect of at least MIN_EFFECT); nothing here is written by
hand about a result.
"""

import pandas as pd

from helpers.measures.stats import holm
from helpers.studies.verdicts import ALPHA, BEATS, BELOW_MINIMUM, MIN_EFFECT, exceeds, versus_random


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
