"""Sentences about this run, generated from its tables: what a notebook says after a table.

Each function takes a table as the notebook wrote it and returns one or two sentences naming the numbers
they rest on. The rule against random sets is `verdicts.versus_random` (rank p, Holm-adjusted across the
table's rows where `holm`, at most ALPHA and an effect of at least MIN_EFFECT); nothing here is written by
hand about a result.
"""

import numpy as np
import pandas as pd

from helpers.measures.methods import holm_family
from helpers.measures.printed import printed
from helpers.measures.stats import TIE_TOLERANCE
from helpers.measures.verdicts import (
    ALPHA,
    BEATS,
    EFFECT_BELOW,
    MIN_EFFECT,
    NOT_INTERPRETABLE,
    PASS,
    can_pass,
    exceeds,
    holm_floor,
    judge,
    printed_difference,
    two_readings,
    versus_random,
)

RULE = f"rank p <= {ALPHA:g} and S - random mean >= {MIN_EFFECT:g}; not interpretable where no result could pass"


def _largest(values: pd.Series, digits: int = 3):
    """The label of the largest value at the printed precision, the first in order among ties, so that a sentence
    names the same row whether it reads the computed table or the published CSV (which holds `digits` decimals)."""
    return values.round(digits).idxmax()


def _names(settings: list[str]) -> str:
    return ", ".join(settings) if settings else "none"


def _calls(table: pd.DataFrame, p, s_column: str, n_tests: int = 1) -> list:
    """`judge` on every row (S from `s_column`, p from `p`)."""
    rows = table.rename(columns={s_column: "S"}).assign(p=np.asarray(p, dtype=float)).to_dict("records")
    return [judge(row, "p", n_tests) for row in rows]


def versus_random_sentence(
    table: pd.DataFrame, measure: str, name_column: str = "setting", s_column: str = "S", holm_rows: bool = True
) -> str:
    """Which rows' S beats its random sets (columns `s_column`, random mean, p, R, random min / max), in the paper's
    two readings (verdicts.two_readings): each set against its own random sets (unadjusted rank p; rows at
    p <= ALPHA with an effect below MIN_EFFECT, and rows that are not interpretable, named) and, where
    `holm_rows`, family-wise (Holm across the rows), with the smallest Holm p this R allows."""
    names = table[name_column].astype(str).tolist()
    readings = two_readings(table.rename(columns={s_column: "S"}))
    raw = readings.per_set
    beats = [n for n, c in zip(names, raw) if c.outcome == BEATS]
    below = [n for n, c in zip(names, raw) if c.reason == EFFECT_BELOW]
    unread = [n for n, c in zip(names, raw) if c.outcome == NOT_INTERPRETABLE]
    text = (
        f"This run, each set against its own random sets: {len(beats)} of {len(table)} {measure} rows beat them "
        f"(rank p <= {ALPHA:g} and S - random mean >= {MIN_EFFECT:g}, unadjusted): {_names(beats)}."
    )
    if below:
        text += f" {len(below)} more reach p <= {ALPHA:g} with an effect below {MIN_EFFECT:g}: {_names(below)}."
    if unread:
        text += f" Not interpretable ({_reasons(raw)}): {_names(unread)}."
    if holm_rows:
        held = [n for n, c in zip(names, readings.family) if c.outcome == BEATS]
        text += f" Family-wise ({readings.note()}): {_names(held)}."
    return text


def _reasons(calls: list) -> str:
    """The distinct reasons of the not-interpretable calls, in order."""
    return "; ".join(dict.fromkeys(c.reason for c in calls if c.outcome == NOT_INTERPRETABLE))


def generic_damage_sentence(table: pd.DataFrame) -> str:
    """Which generic-damage sets give an NCS of at least MIN_EFFECT, beside the discovered set's."""
    rows = table.set_index("head-set")
    others = rows.drop(index="discovered")
    necessary = [f"{name} {printed(value)}" for name, value in others["NCS"].items() if exceeds(value)]
    return (
        f"This run: the discovered set's NCS is {printed(rows.loc['discovered', 'NCS'])}; {len(necessary)} of "
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
        calls = _calls(rows, rows["p"], "NCS")
        beats = [s for s, c in zip(rows.setting, calls) if c.outcome == BEATS]
        parts.append(f"{model} ({rows.audit.iloc[0]}): {_names(beats)}")
    return (
        f"This run, sets whose NCS beats its random sets (rank p <= {ALPHA:g} and effect >= "
        f"{MIN_EFFECT:g}) per model: " + "; ".join(parts) + "."
    )


def methods_validation_sentence(table: pd.DataFrame) -> str:
    """Notebook 08's methods table: which methods' top-k sets beat their random sets on NCS and on CERS, against
    layer-matched and any-layer sets (Holm-adjusted rank p within each Holm family of the tested rows,
    helpers.measures.methods.holm_family, and the effect S - random mean, by versus_random), which reach
    p <= ALPHA with too small an effect, and their overlap with co-ref-qsp."""
    refused = table[table["kind"] == "refused"]["method"].tolist() if "kind" in table else []
    tested = table[table["kind"] != "refused"] if "kind" in table else table
    parts = []
    for measure in ("NCS", "CERS"):
        for control, prefix, r_column in (
            ("layer-matched", measure, "R"),
            ("any-layer", f"{measure} any-layer", "R any-layer"),
        ):
            p = tested[f"{prefix} p Holm"].to_numpy(dtype=float)
            effect = [printed_difference(s, r) for s, r in zip(tested[f"{measure} S"], tested[f"{prefix} random"])]
            ran = np.isfinite(p)
            r_values = tested[r_column].to_numpy()
            family = np.array([holm_family(name) for name in tested["method"]])
            n_tests = [int((ran & (family == f)).sum()) for f in family]
            calls = [
                versus_random(pi, ei, int(r), n) if ok else None
                for pi, ei, r, n, ok in zip(p, effect, r_values, n_tests, ran)
            ]
            names = tested["method"].tolist()
            beats = [n for n, c in zip(names, calls) if c and c.outcome == BEATS]
            below = [n for n, c in zip(names, calls) if c and c.reason == EFFECT_BELOW]
            floor = holm_floor(int(tested[r_column].max()), max(n_tests, default=0))
            text = f"{measure} vs {control} (floor {floor:.3f}): {_names(beats)}"
            if below:
                text += f" (p <= {ALPHA:g} with an effect below {MIN_EFFECT:g}: {_names(below)})"
            parts.append(text)
    overlap = tested.set_index("method")["overlap with co-ref-qsp per 100"]
    sentence = (
        f"This run, of {len(tested)} methods' top-k sets, those that beat their random sets (rank p Holm-adjusted "
        f"within the published methods and, apart, within the causal references, <= {ALPHA:g}, and S - random mean "
        f">= {MIN_EFFECT:g}; the floor is the published methods'): " + "; ".join(parts) + ". "
        f"Heads shared with co-ref-qsp's set, per 100 of k: median {overlap.median():.0f}, most {overlap.max():.0f} "
        f"({_largest(overlap, 0)})."
    )
    if refused:
        sentence += f" Refused on this model or these strips: {_names(refused)}."
    return sentence


def holm_reach_sentence(stats: pd.DataFrame, n_random: dict[str, int], needed: int) -> str:
    """Notebook 08: the smallest Holm-adjusted rank p any method can reach per control and Holm family (the `stats`
    rows tested per family, measure and control, `n_random`: control -> R), and `needed`, the least R at which Holm
    across the published methods reaches ALPHA."""
    parts, blocked = [], []
    for (family, measure, control), rows in stats.groupby(["Holm family", "measure", "control"], sort=False):
        floor = holm_floor(n_random[control], len(rows))
        parts.append(f"{measure} vs {control} {floor:.3f} ({len(rows)} {family}, R = {n_random[control]})")
        if not can_pass(n_random[control], len(rows)):
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


def methods_ceiling_sentence(across_halves: pd.DataFrame, ceilings: pd.Series, k: int) -> str:
    """Notebook 08: each method's half-split ceiling beside its largest overlap with another column across the same
    kind of halves (`across_halves`: rows methods, columns methods and settings; a method's top-k on one half
    against the column's top-k on the other, helpers.measures.methods.ceiling.shared_across_halves), and the
    methods whose largest such overlap reaches their own ceiling (as close to another column as to a second half
    of their own strips). `ceilings`: column -> half-split ceiling."""
    methods = list(across_halves.index)
    parts, reached = [], []
    for method in methods:
        others = across_halves.loc[method].drop(method)
        nearest = _largest(others, 1)
        parts.append(f"{method} {ceilings[method]:.1f} / {others[nearest]:.1f} ({nearest})")
        if np.isfinite(ceilings[method]) and round(others[nearest], 1) >= round(ceilings[method], 1):
            reached.append(method)
    settings = ceilings.drop(methods)
    return (
        f"This run, top-{k} on disjoint halves of the items: each method's half-split ceiling / its largest overlap "
        "with another method or setting across halves: "
        + "; ".join(parts)
        + f". The settings' ceilings: median {settings.median():.1f} (range {settings.min():.1f}-"
        f"{settings.max():.1f}). Methods whose largest overlap reaches their own ceiling: {_names(reached)}."
    )


def methods_damage_sentence(table: pd.DataFrame) -> str:
    """Notebook 08's methods table: whose set is more necessary than every generic-damage set (the card's verdict:
    NCS lower bound at least MIN_EFFECT above the largest generic-damage NCS), and the largest generic-damage NCS."""
    tested = table[table["kind"] != "refused"].set_index("method")
    passed = tested.index[tested["damage verdict"] == PASS].tolist()
    worst = _largest(tested["damage NCS max"])
    return (
        f"This run, generic damage at each method's k: {len(passed)} of {len(tested)} methods' sets are more "
        f"necessary (NCS lower bound >= {MIN_EFFECT:g} above every generic-damage set's NCS): {_names(passed)}. The "
        f"largest generic-damage NCS: {printed(tested.loc[worst, 'damage NCS max'])} "
        f"({tested.loc[worst, 'damage set of max']}, beside {worst}'s set)."
    )


def _unadjusted_calls(names, p, s, random_mean, n_random) -> list:
    """versus_random (unadjusted) on each name's (p, S - random mean as printed) at `n_random` random sets (a column
    or one number)."""
    r = np.broadcast_to(np.asarray(n_random, dtype=int), (len(names),))
    return [versus_random(pi, printed_difference(si, ri), int(n)) for pi, si, ri, n in zip(p, s, random_mean, r)]


def _beats(names, p, s, random_mean, n_random) -> list[str]:
    """The names whose (p, S - random mean) at `n_random` random sets beats random by versus_random (unadjusted)."""
    calls = _unadjusted_calls(names, p, s, random_mean, n_random)
    return [n for n, c in zip(names, calls) if c.outcome == BEATS]


def _effect_below(names, p, s, random_mean, n_random) -> list[str]:
    """The names at p <= ALPHA whose effect is below MIN_EFFECT (versus_random's EFFECT_BELOW, unadjusted)."""
    calls = _unadjusted_calls(names, p, s, random_mean, n_random)
    return [n for n, c in zip(names, calls) if c.reason == EFFECT_BELOW]


TABLE5_ROW_GROUPS = ("all", "prompt", "last")  # Table 5's row groups


def ncs_rows_sentence(table: pd.DataFrame) -> str:
    """Table 5: per row group of the flat sets and for the top-k-per-layer sets (NCS and CERS), which settings
    beat their random sets (versus_random, unadjusted), with co-ref-qsp's values."""
    names = table["setting"].tolist()
    columns = {
        group: (table[f"{group} p"], table[group], table[f"{group} random mean"]) for group in TABLE5_ROW_GROUPS
    }
    parts = [f"{group} rows {_names(_beats(names, *columns[group], table.R))}" for group in TABLE5_ROW_GROUPS]
    per_layer = "per layer"
    ncs_beats, cers_beats = (
        _beats(names, table[f"{per_layer} {m} p"], table[f"{per_layer} {m}"], table[f"{per_layer} {m} random mean"],
               table.R)
        for m in ("NCS", "CERS")
    )  # fmt: skip
    rows = table.set_index("setting")
    shown = ", ".join(
        f"{s}: all {printed(rows.loc[s, 'all'])}, prompt {printed(rows.loc[s, 'prompt'])}, "
        f"last {printed(rows.loc[s, 'last'])}, "
        f"per layer {printed(rows.loc[s, 'per layer NCS'])}"
        for s in rows.index[:1]
    )
    return (
        f"This run ({RULE}, R = {int(table['R'].max())}): flat sets whose NCS beats their random sets at "
        + "; ".join(parts)
        + f". Top-k-per-layer sets: NCS {_names(ncs_beats)}; CERS {_names(cers_beats)}. NCS of {shown}."
    )


def region_contrast_sentence(table: pd.DataFrame) -> str:
    """Tables 6 / 16 (04, or 06 with a model column): which sets' NCS_grid and symmetric CERS beat their random
    sets (versus_random, unadjusted) and which reach p <= ALPHA with an effect below MIN_EFFECT, the largest
    NCS_grid as a share of the largest attainable, and the grid audit."""
    parts = []
    groups = table.groupby("model", sort=False) if "model" in table else [(None, table)]
    for model, rows in groups:
        names = rows["setting"].tolist()
        measures = [m for m in ("NCS_grid", "symmetric CERS") if f"{m} p" in rows]
        columns = {m: (rows[f"{m} p"], rows[f"{m} S"], rows[f"{m} random mean"], rows["R"]) for m in measures}
        calls = []
        for m in measures:
            beats, below = _beats(names, *columns[m]), _effect_below(names, *columns[m])
            call = f"{m} beats random in {len(beats)} of {len(rows)}: {_names(beats)}"
            if below:
                call += f" ({_names(below)} at p <= {ALPHA:g} with an effect below {MIN_EFFECT:g})"
            calls.append(call)
        attainable = float(rows["largest attainable NCS_grid"].iloc[0])
        best = rows.loc[_largest(rows["NCS_grid S"])]
        text = (
            f"{model + ': ' if model else ''}grid audit {rows['grid audit'].iloc[0]} (oracle "
            f"{rows['grid oracle'].iloc[0]:.3f}, blank {rows['grid blank'].iloc[0]:.3f}); "
            + "; ".join(calls)
            + f"; the largest NCS_grid, {best['setting']} {printed(best['NCS_grid S'])}, "
            + _attainable_share(float(best["NCS_grid S"]), attainable)
        )
        parts.append(text)
    r = int(table["R"].max()) if len(table) else 0
    return f"This run ({RULE}, R = {r}): " + (" | ".join(parts) if parts else "no model scored") + "."


def _attainable_share(best: float, attainable: float) -> str:
    """The largest NCS_grid beside the "largest attainable" (the cell hidden from every head): a share where
    that value bounds it; where a set reaches above it (hiding the cell from all heads lowers P(c) less than
    hiding it from some), that value is no bound and no share is given."""
    if best > attainable:
        return (
            f"lies above the largest attainable {printed(attainable)} (the cell hidden from every head), which is "
            "therefore no bound on this model"
        )
    if attainable <= 0:
        return f"beside a largest attainable of {printed(attainable)} (not positive: no share)"
    share = 100 * round(best, 3) / round(attainable, 3)  # of the values as printed, so the CSV gives the same share
    return f"is {printed(share, 0)}% of the largest attainable {printed(attainable)}"


def rank_p_sentence(table: pd.DataFrame) -> str:
    """Table 9: per measure, which settings beat layer-matched (A) and layer- and attention-matched (B) random
    sets, each set against its own random sets (versus_random, unadjusted), the settings whose call changes from A
    to B, and the family-wise reading (verdicts.two_readings: Holm across the settings)."""
    names = table["setting"].tolist()
    parts, family = [], []
    for measure in ("CERS", "NCS"):
        beats = {}
        for control in ("A", "B"):
            columns = {
                f"{measure} S": "S",
                f"{measure} random {control}": "random mean",
                f"{measure} p {control}": "p",
            }
            readings = two_readings(table[[*columns, "setting", "R"]].rename(columns=columns))
            beats[control] = [n for n, c in zip(names, readings.per_set) if c.outcome == BEATS]
            held = [n for n, c in zip(names, readings.family) if c.outcome == BEATS]
            family.append(f"{measure} {control} {_names(held)}")
        a, b = beats["A"], beats["B"]
        changed = sorted(set(a) ^ set(b), key=names.index)
        parts.append(f"{measure}: A {len(a)} of {len(names)} ({_names(a)}), B {len(b)} ({_names(b)}), "
                     f"call changed from A to B: {_names(changed)}")  # fmt: skip
    note = readings.note()  # every column of the table has the same R
    return (
        f"This run ({RULE}, R = {int(table['R'].max())}), each set against its own random sets: "
        + "; ".join(parts)
        + f". Family-wise ({note}): "
        + ", ".join(family)
        + "."
    )


def ncs_rows_groups_sentence(table: pd.DataFrame) -> str:
    """Table 13: per selection (flat, per layer) and row group, which settings beat their random sets."""
    parts = []
    for (selection, row_group), group in table.groupby(["selection", "rows"], sort=False):  # Table 13 names it rows
        beats = _beats(group["setting"], group["p"], group["S"], group["random mean"], group["R"])
        values = ", ".join(f"{s} {printed(v)}" for s, v in zip(group["setting"], group["S"]))
        parts.append(f"{selection} at {row_group} rows: {_names(beats)} ({values})")
    return (
        f"This run ({RULE}, R = {int(table['R'].max())}), sets that beat their random sets: " + "; ".join(parts) + "."
    )


def ncs_vs_k_sentence(table: pd.DataFrame) -> str:
    """Table 14: per setting, the k at which the top-k set beats its random sets and the k of its largest NCS."""
    parts = []
    for setting, rows in table.groupby("setting", sort=False):
        beats = _beats(rows["k"].astype(int).astype(str), rows["p"], rows["S"], rows["random mean"], rows["R"])
        best = rows.loc[_largest(rows["S"])]
        parts.append(f"{setting} at k = {_names(beats)} of {', '.join(map(str, rows['k'].astype(int)))} "
                     f"(largest NCS {printed(best['S'])} at k = {int(best['k'])})")  # fmt: skip
    return f"This run ({RULE}), top-k sets that beat their random sets: " + "; ".join(parts) + "."


def shared_heads_sentence(table: pd.DataFrame) -> str:
    """Table 15: per part (shared, a only, b only), the pairs whose part beats its same-size random sets
    (versus_random on the part's `rank p` among its R random sets and its excess, S - random mean) and the pairs
    where the part is empty."""
    parts = []
    pairs = [f"{a} / {b}" for a, b in zip(table["a"], table["b"])]
    for part in ("shared", "a-only", "b-only"):
        excess, p = table[f"{part} excess"], table[f"{part} rank p"]
        ran = p.notna().to_numpy()
        beats = _beats([n for n, ok in zip(pairs, ran) if ok], p[ran], excess[ran], np.zeros(ran.sum()), table.R[ran])
        parts.append(f"{part} {len(beats)} of {int(ran.sum())} ({_names(beats)})")
    return (
        f"This run ({RULE}, R = {int(table['R'].max())}), parts whose NCS beats their same-size random sets: "
        + "; ".join(parts)
        + "."
    )


def beta_sweep_sentence(table: pd.DataFrame) -> str:
    """Table 18: per setting, S's CERS at every β of the sweep, in order of β."""
    betas = sorted(set(table["beta"]))
    parts = [
        f"{setting} " + ", ".join(printed(s) for s in rows.sort_values("beta")["S"])
        for setting, rows in table.groupby("setting", sort=False)
    ]
    return f"This run, S's CERS at β = {', '.join(f'{b:g}' for b in betas)}: " + "; ".join(parts) + "."


def mass_cers_sentence(table: pd.DataFrame) -> str:
    """Table 17: in how many settings S's mean image mass lies above every random set's (by more than
    TIE_TOLERANCE, as a rank p counts a random set that close as a tie), and the range of the Spearman rho between
    the mean mass and CERS across the random sets."""
    above = table.loc[table["mass S"] - table["mass random max"] > TIE_TOLERANCE, "setting"].tolist()
    rho = table["rho mean"].dropna()
    spread = (
        f"{printed(rho.min(), 2)} to {printed(rho.max(), 2)} (median {printed(rho.median(), 2)})"
        if len(rho)
        else "not estimable"
    )
    return (
        f"This run (R = {int(table['R'].max())}): S's mean image mass lies above every random set's in "
        f"{len(above)} of {len(table)} settings ({_names(above)}); Spearman rho of the mean mass with CERS "
        f"across the random sets: {spread} over {len(rho)} settings."
    )


def crossover_sentence(table: pd.DataFrame, k: int) -> str:
    """Tables 2 / 21: each crossover combination's largest overlap with a native set, and each native
    combination's overlap with its own native set, per k heads."""
    natives = [c for c in table.columns if c.startswith("native ")]
    own = table.dropna(subset=["own native"])
    crossing = table[table["own native"].isna()]
    most = ", ".join(f"{row['combination']} {int(max(row[c] for c in natives))}" for _, row in crossing.iterrows())
    kept = ", ".join(f"{c} {int(v)}" for c, v in zip(own["combination"], own["own native"]))
    return (
        f"This run, top-{k} from {int(table['strips'].iloc[0])} strips: the most heads a crossover combination "
        f"shares with any native set: {most}; a native combination's heads kept in its own native set: {kept}."
    )


# ------------------------------------------------------------------ control schemes (notebook 05, issue 40)


def _listed(names: list[str], limit: int = 4) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _unadjusted_calls_by_setting(rows: pd.DataFrame) -> dict[str, str]:
    """Setting -> the outcome of `judge` on its unadjusted rank p (beats random, within random, not
    interpretable), for `rows` indexed by setting."""
    return {setting: judge(row).outcome for setting, row in zip(rows.index, rows.to_dict("records"))}


def scheme_changes(table: pd.DataFrame, reference: str = "layer-matched") -> str:
    """A sentence, computed from `scheme_verdicts`' table, on which schemes change a setting's verdict
    (Holm) or its unadjusted call relative to the `reference` scheme; with the unseeded scheme's
    per-seed calls ('seeds beating', 'seeds not interpretable'), how many settings' calls depend on the seed."""
    ref = table[table["scheme"] == reference].set_index("setting")
    n, r = len(ref), int(ref["R"].iloc[0])
    tally = ref["verdict"].value_counts()
    floor = f" (at R = {r} no rank p can: its floor is {1 / (r + 1):.3f})" if not can_pass(r) else ""
    parts = [
        f"Against {reference} random sets (R = {r}), "
        + ", ".join(f"{count} of {n} settings {verdict}" for verdict, count in tally.items())
        + f" after Holm, and {int(ref['significant'].sum())} of {n} reach rank p <= {ALPHA:g} with S above the "
        f"random mean by >= {MIN_EFFECT:g} unadjusted{floor}."
    ]
    same, changes = [], []
    ref_calls = _unadjusted_calls_by_setting(ref)
    for scheme, rows in table[table["scheme"] != reference].groupby("scheme", sort=False):
        rows = rows.set_index("setting").loc[ref.index]
        verdict = [f"{s} ({ref.loc[s, 'verdict']} -> {rows.loc[s, 'verdict']})" for s in ref.index
                   if rows.loc[s, "verdict"] != ref.loc[s, "verdict"]]  # fmt: skip
        now = _unadjusted_calls_by_setting(rows)
        call = [f"{s} ({now[s]})" for s in ref.index if now[s] != ref_calls[s]]
        if not verdict and not call:
            same.append(scheme)
            continue
        said = []
        if verdict:
            said.append(f"the Holm verdict of {len(verdict)} setting(s): {_listed(verdict)}")
        if call:
            said.append(f"the unadjusted call of {len(call)} setting(s): {_listed(call)}")
        other_r = sorted(set(rows["R"].astype(int)) - {r})
        named = f"{scheme} (R = {', '.join(map(str, other_r))})" if other_r else scheme
        if "distinct" in rows and (rows["distinct"] < rows["R"]).any():
            fewest = int(rows["distinct"].min())
            named += f" (as few as {fewest} distinct set(s) of R drawn: rank p no lower than {1 / (fewest + 1):.3f})"
        changes.append(f"{named} changes " + " and ".join(said))
    if changes:
        parts.append("; ".join(changes) + ".")
    if same:
        parts.append(f"{_listed(same, len(same))} change no setting's verdict or call.")
    else:
        parts.append("Every other scheme changes at least one setting's verdict or call.")
    seeds = table[(table["scheme"] == "unseeded")] if "seeds beating" in table else table.iloc[:0]
    if len(seeds):
        beats, total = seeds["seeds beating"].astype(int), seeds["seeds"].astype(int)
        unread = seeds["seeds not interpretable"].astype(int)
        split = seeds.loc[(beats > 0) & (beats < total), "setting"].tolist()
        per_seed = int(seeds["R per seed"].iloc[0])
        text = (
            f"Each seed of the unseeded draw alone ({per_seed} random set(s), as Retrieval_Head draws for one context "
            "length x depth cell of a run, a new unseeded set per cell): "
        )
        if (unread == total).all():
            text += (
                f"not interpretable at every seed in every setting, since {per_seed} set(s) allow no rank p below "
                f"{1 / (per_seed + 1):.3f}: a single unseeded draw cannot show that S beats random."
            )
        else:
            text += (
                f"S beats random at every seed in {int((beats == total).sum())} settings, at none in "
                f"{int((beats == 0).sum())}, and the call depends on the seed in {len(split)}"
                + (f" ({_listed(split)})." if split else ".")
            )
        parts.append(text)
    return " ".join(parts)
