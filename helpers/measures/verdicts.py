"""Verdicts of the report card: one row per check, pass / fail / not interpretable / not run, with the
number it rests on and the reason.

Rules (the thresholds are named constants, so a report states what it applied):

- baseline audit (Table 22): each clean P(correct) must lie in AUDIT_RANGES; a check that depends on an
  audit out of range (DEPENDS_ON) is "not interpretable", never scored;
- every comparison counts a difference as an effect only when it reaches MIN_EFFECT (exceeds), never on a
  float-noise margin; a verdict compares each number with its threshold as the tables print it (printed.as_printed,
  at printed.TABLE_DIGITS decimals; a difference of two printed columns as `printed_difference`), so an effect
  printed as 0.010 reaches 0.01 and one printed as 0.009 does not;
- against random sets (`versus_random`, the one rule of every table, figure colour, sentence, claim and
  card row; tests/test_verdict_rule.py fails on any module that decides on p or effect by itself): beats
  random when the (Holm-adjusted) rank p <= ALPHA and S exceeds the random sets' mean by MIN_EFFECT;
  "not interpretable" when no result could pass (too few distinct random sets for p <= ALPHA, or for Holm
  across the head-sets), when S sits in a random range narrower than MIN_EFFECT at the printed precision,
  or, for a call on z, when the random SD is below Z_SD_FLOOR; within random otherwise;
- the half-split noise ceiling: pass when the two halves of the discovery data share >= CEILING_SHARE of
  the top-k;
- generic damage: pass when S's NCS interval lies MIN_EFFECT above the NCS of every generic-damage set;
- the beta sweep: pass when S steers MIN_EFFECT more than every one of its random sets at every beta.
"""

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from helpers.measures.names import CONTROL_SCHEMES
from helpers.measures.printed import as_printed, printed
from helpers.measures.stats import holm
from helpers.sizes import RANDOM_SETS

PASS, FAIL, NOT_INTERPRETABLE, NOT_RUN = "pass", "fail", "not interpretable", "not run"
ALPHA = 0.05
# The R of the paper's family-wise claim (Table 10): Holm across 12 can reach 12 / 251 = .048
R_FAMILY_WISE = RANDOM_SETS["table10"]["paper"]
AUDIT_RANGES = {"oracle": (0.85, 1.0), "blank": (0.15, 0.35), "matched": (0.85, 1.0), "mismatched": (0.15, 0.35)}
AUDIT_EXPECTED = {"oracle": "~1", "blank": "~0.25", "matched": "~1", "mismatched": "~0.25"}
CEILING_SHARE = 0.8
# The smallest difference in P(correct), or in a score made of such differences (NCS, CERS), that a verdict
# counts as an effect: one percentage point, judged as the tables print it (three decimals: >= 0.010); below it
# lie float noise (~1e-6 where both sides are ~0) and changes no reader would call an effect.
MIN_EFFECT = 0.01
GRID_AUDITS = ("oracle", "blank")  # the 2x2 grid: CERS, its beta sweep and NCS_grid rest on it
SINGLE_AUDITS = ("matched", "mismatched")  # the single-image MCQ: NCS, generic damage, row groups
DEPENDS_ON = {
    "NCS vs layer-matched": SINGLE_AUDITS,
    "NCS_grid vs layer-matched": GRID_AUDITS,
    "CERS vs layer-matched": GRID_AUDITS,
    "CERS vs any-layer": GRID_AUDITS,
    "CERS beta sweep": GRID_AUDITS,
    "generic damage": SINGLE_AUDITS,
    "NCS at question + option rows": SINGLE_AUDITS,
    "NCS at the last row": SINGLE_AUDITS,
}
# the report card's optional --controls line: NCS against the random sets of one of the field's control schemes
SCHEME_DEPENDS_ON = {f"NCS vs {scheme}": SINGLE_AUDITS for scheme in CONTROL_SCHEMES if scheme != "layer-matched"}
COLUMNS = ["head-set", "check", "verdict", "number", "reason"]


@dataclass(frozen=True)
class Verdict:
    head_set: str
    check: str
    verdict: str
    number: str
    reason: str

    def row(self) -> dict:
        return dict(zip(COLUMNS, (self.head_set, self.check, self.verdict, self.number, self.reason)))


def audit_verdicts(means: dict[str, float]) -> list[Verdict]:
    """One verdict per audit (mean clean P(correct)) against AUDIT_RANGES."""
    out = []
    for name, value in means.items():
        low, high = AUDIT_RANGES[name]
        inside = low <= value <= high
        reason = f"expected {AUDIT_EXPECTED[name]} (range {low:g}-{high:g})"
        out.append(
            Verdict(
                "(evaluation data)",
                f"baseline: {name}",
                PASS if inside else FAIL,
                f"P(correct) = {value:.3f}",
                reason + ("" if inside else ": out of range, the checks resting on it are not interpretable"),
            )
        )
    return out


def blocked_by(check: str, audits: list[Verdict]) -> str | None:
    """Why `check` cannot be interpreted (an audit it depends on is out of range), or None."""
    needs = DEPENDS_ON[check] if check in DEPENDS_ON else SCHEME_DEPENDS_ON[check]
    failed = [v for v in audits if v.verdict != PASS and v.check.removeprefix("baseline: ") in needs]
    if not failed:
        return None
    return "baseline out of range: " + ", ".join(f"{v.check.removeprefix('baseline: ')} {v.number}" for v in failed)


def exceeds(difference: float, minimum: float = MIN_EFFECT) -> bool:
    """`difference` counts as an effect: as printed, it reaches `minimum` (a tie is anything closer to 0 than that)."""
    return bool(as_printed(difference) >= minimum)


def printed_difference(a: float, b: float) -> float:
    """a - b as a reader takes it from a table: the difference of the two values as printed."""
    return as_printed(as_printed(a) - as_printed(b))


BEATS, WITHIN = "beats random", "within random"  # with NOT_INTERPRETABLE, the outcomes of `versus_random`
# Why `versus_random` decided as it did (Call.reason):
PASSED = "rank p <= alpha and effect >= the minimum"
P_ABOVE = "rank p above alpha"
EFFECT_BELOW = "effect below the minimum"  # p at most alpha, S too close to the random mean to count
TOO_FEW_SETS = "too few distinct random sets"  # 1 / (distinct + 1) > alpha: no rank p can reach alpha
HOLM_FLOOR = "Holm floor above alpha"  # n_tests / (distinct + 1) > alpha: none can after Holm
TIED = "S tied with the random range"  # a degenerate random range that S sits in at the printed precision
SD_BELOW = "random SD below the z-estimable bound"  # a z-based call whose z measures float noise
# A z needs random sets that vary: below this SD (a tenth of MIN_EFFECT) the random sets sit at float noise
# and z = (S - mean) / SD measures that noise, not S (the tables cap and flag it at Z_CAP).
Z_SD_FLOOR = MIN_EFFECT / 10


@dataclass(frozen=True)
class Call:
    """One head-set against its random sets: the outcome (BEATS, WITHIN, NOT_INTERPRETABLE), the reason (one
    of the reason constants) and a sentence giving the numbers it rests on."""

    outcome: str
    reason: str
    text: str


def versus_random(
    p: float,
    effect: float,
    n_random: int,
    n_tests: int = 1,
    s: float | None = None,
    random_range: tuple[float, float] | None = None,
    random_sd: float | None = None,
    on_z: bool = False,
    alpha: float = ALPHA,
    minimum: float = MIN_EFFECT,
) -> Call:
    """The one rule by which a head-set S is judged against its random sets, in every table, figure colour,
    sentence, claim and card row.

    p: S's rank p (Holm-adjusted across `n_tests` sets when n_tests > 1); effect: S minus the random sets'
    mean; n_random: the number of DISTINCT random sets p was ranked among. p, the effect, the range's width and
    the SD meet their thresholds as printed (as_printed). In order:
    - not interpretable when no result could pass: 1 / (n_random + 1) > alpha (TOO_FEW_SETS), or
      n_tests / (n_random + 1) > alpha (HOLM_FLOOR); when the random sets' range [min, max] (`random_range`)
      is narrower than `minimum` and S lies in it as printed (TIED: the random sets and S
      sit together and the rank follows float noise); for a call on z (`on_z`) when `random_sd` is below
      Z_SD_FLOOR (SD_BELOW);
    - beats random when p <= alpha AND the effect reaches `minimum` (PASSED);
    - within random otherwise (P_ABOVE, or EFFECT_BELOW: p at most alpha with S too close to the mean)."""
    floor = n_tests / (n_random + 1)
    p, effect = as_printed(p), as_printed(effect)
    which_p = "rank p" if n_tests == 1 else f"rank p Holm-adjusted across {n_tests} sets"
    numbers = f"{which_p} {printed(p)} over {n_random} distinct random sets, effect {printed(effect)}"
    if 1 / (n_random + 1) > alpha:
        why = f"{n_random} distinct random set(s): the rank p cannot go below {1 / (n_random + 1):.3f} > {alpha:g}"
        return Call(NOT_INTERPRETABLE, TOO_FEW_SETS, why)
    if floor > alpha:
        why = f"Holm across {n_tests} sets at {n_random} random sets: no p goes below {min(floor, 1):.3f} > {alpha:g}"
        return Call(NOT_INTERPRETABLE, HOLM_FLOOR, why)
    if s is not None and random_range is not None and _tied(s, *random_range, minimum):
        low, high = random_range
        why = (
            f"S {printed(s)} lies in the random range {printed(low)} to {printed(high)}, "
            f"narrower than {minimum:g}: S and the random sets sit together"
        )
        return Call(NOT_INTERPRETABLE, TIED, why)
    if on_z and not z_estimable(random_sd):
        return Call(NOT_INTERPRETABLE, SD_BELOW, f"random SD {random_sd:.2g} < {Z_SD_FLOOR:g}: z is not estimable")
    if p <= alpha and exceeds(effect, minimum):
        return Call(BEATS, PASSED, f"{numbers}: p <= {alpha:g} and effect >= {minimum:g}")
    if p <= alpha:
        return Call(
            WITHIN, EFFECT_BELOW, f"{numbers}: p <= {alpha:g} but the effect is below the minimum effect {minimum:g}"
        )
    return Call(WITHIN, P_ABOVE, f"{numbers}: p > {alpha:g}")


def _tied(s: float, low: float, high: float, minimum: float) -> bool:
    """S and a random range narrower than `minimum` that holds S, all as printed."""
    return bool(printed_difference(high, low) < minimum and as_printed(low) <= as_printed(s) <= as_printed(high))


def judge(row: dict, p_column: str = "p", n_tests: int = 1, on_z: bool = False, alpha: float = ALPHA) -> Call:
    """`versus_random` on a table row: S, random mean, R (or 'distinct', the distinct random sets, where the
    row has it), `p_column`, and where present random min / max and random sd; the effect is S minus the random
    mean as the table prints them (`printed_difference`)."""
    n_random = int(row["distinct"]) if "distinct" in row else int(row["R"])
    has_range = "random min" in row and "random max" in row
    return versus_random(
        float(row[p_column]),
        printed_difference(row["S"], row["random mean"]),
        n_random,
        n_tests,
        s=float(row["S"]),
        random_range=(float(row["random min"]), float(row["random max"])) if has_range else None,
        random_sd=float(row["random sd"]) if "random sd" in row else None,
        on_z=on_z,
        alpha=alpha,
    )


def outcomes(table: pd.DataFrame, p_column: str = "p", n_tests: int = 1) -> list[str]:
    """The outcome of `judge` for every row of `table`."""
    return [judge(row, p_column, n_tests).outcome for row in table.to_dict("records")]


def in_range(s: float, low: float, high: float, minimum: float = MIN_EFFECT) -> bool | None:
    """S lies in the random range [low, high] as printed (True) or outside it (False); None where S ties with an
    edge of a range narrower than `minimum` (S and the random sets sit together: no reading)."""
    s_, low_, high_ = (as_printed(v) for v in (s, low, high))
    if printed_difference(high, low) < minimum and s_ in (low_, high_):
        return None
    return bool(low_ <= s_ <= high_)


def can_pass(n_random: int, n_tests: int = 1, alpha: float = ALPHA) -> bool:
    """Some result could beat random at `n_random` distinct random sets and Holm across `n_tests` sets."""
    return versus_random(0.0, math.inf, n_random, n_tests, alpha=alpha).outcome != NOT_INTERPRETABLE


def paired_difference(p: float, difference: float, alpha: float = ALPHA, minimum: float = MIN_EFFECT) -> bool:
    """Two settings' paired comparison: the difference reaches `minimum` with its paired p below `alpha`, both as
    printed."""
    return bool(as_printed(p) < alpha and exceeds(difference, minimum))


def p_at_least(p_values, bound: float) -> bool:
    """Every rank p is at least `bound` (a claim stated as a bound on p, whatever the effect)."""
    return bool(np.all(np.asarray(p_values, dtype=float) >= bound))


def z_estimable(random_sd: float) -> bool:
    """A z-score means something: the random sets' SD, as printed, reaches Z_SD_FLOOR."""
    return bool(as_printed(random_sd) >= Z_SD_FLOOR)


def holm_floor(n_random: int, n_sets: int) -> float:
    """The smallest Holm-adjusted rank p any set can get: n_sets / (R + 1), capped at 1."""
    return min(1.0, n_sets / (n_random + 1))


def holm_random_sets(n_sets: int, alpha: float = ALPHA) -> int:
    """The least R at which Holm across `n_sets` sets can reach `alpha`: the least R with holm_floor(R, n_sets) <=
    alpha (R + 1 >= n_sets / alpha)."""
    if n_sets < 1 or not 0 < alpha < 1:
        raise ValueError(f"n_sets={n_sets} must be >= 1 and alpha={alpha} in (0, 1)")
    n_random = max(1, math.ceil(n_sets / alpha) - 1)
    while holm_floor(n_random, n_sets) > alpha:  # n_sets / alpha rounded down in floating point
        n_random += 1
    while n_random > 1 and holm_floor(n_random - 1, n_sets) <= alpha:
        n_random -= 1
    return n_random


def against_random_verdict(
    head_set: str, check: str, row: dict, n_random: int, n_sets: int, audits: list[Verdict]
) -> Verdict:
    """Verdict of S against R random sets from a row with S, random mean, p, p Holm and z: `versus_random` on
    the Holm-adjusted p across `n_sets` sets (pass: beats random; fail: within random; else not interpretable);
    a row's 'distinct' (distinct random sets, where fewer than R) replaces R."""
    n_random = int(row.get("distinct", n_random))
    floor = holm_floor(n_random, n_sets)
    number = (
        f"S {printed(row['S'])} vs random {printed(row['random mean'])}; rank p {row['p']:.3f} "
        f"(Holm {row['p Holm']:.3f}, floor {floor:.3f}, R = {n_random}); z {printed(row['z'], 1)}"
    )
    blocked = blocked_by(check, audits)
    if blocked:
        return Verdict(head_set, check, NOT_INTERPRETABLE, number, blocked)
    call = judge({**row, "distinct": n_random}, "p Holm", n_sets)
    verdict = {BEATS: PASS, WITHIN: FAIL}.get(call.outcome, NOT_INTERPRETABLE)
    return Verdict(head_set, check, verdict, number, f"{call.outcome}: {call.text}")


def ceiling_verdict(head_set: str, ceiling: dict | None) -> Verdict:
    """Verdict of the half-split noise ceiling (mean shared heads of two halves' top-k, over splits)."""
    check = "discovery noise ceiling"
    if ceiling is None:
        return Verdict(head_set, check, NOT_RUN, "--", "no discovery setting of this model is known for the set")
    share = ceiling["ceiling"] / ceiling["k"]
    number = f"{ceiling['ceiling']:.1f} of {ceiling['k']} heads shared by two halves ({ceiling['n_strips']} strips)"
    verdict = PASS if share >= CEILING_SHARE else FAIL
    relation = ">=" if verdict == PASS else "<"
    return Verdict(head_set, check, verdict, number, f"share {share:.2f} {relation} {CEILING_SHARE}")


def damage_verdict(head_set: str, s_low: float, damage: pd.DataFrame, audits: list[Verdict]) -> Verdict:
    """Verdict of S's NCS (lower interval bound) against the NCS of the generic-damage sets."""
    check = "generic damage"
    others = damage[damage["damage set"] != "discovered"]
    worst = others.loc[others["NCS"].idxmax()]
    number = (
        f"S's NCS low {printed(s_low)} vs {worst['damage set']} {printed(worst['NCS'])} (the largest of {len(others)})"
    )
    blocked = blocked_by(check, audits)
    if blocked:
        return Verdict(head_set, check, NOT_INTERPRETABLE, number, blocked)
    if exceeds(printed_difference(s_low, worst["NCS"])):
        return Verdict(
            head_set, check, PASS, number, f"S's necessity exceeds every generic-damage set's by >= {MIN_EFFECT:g}"
        )
    return Verdict(head_set, check, FAIL, number, f"a generic-damage set comes within {MIN_EFFECT:g} of S's necessity")


def sweep_verdict(head_set: str, sweep: pd.DataFrame, audits: list[Verdict]) -> Verdict:
    """Verdict of the beta sweep: S above every random set's CERS at every beta."""
    check = "CERS beta sweep"
    margin = [printed_difference(s, high) for s, high in zip(sweep["S"], sweep["random max"])]
    below = sweep.loc[[not exceeds(m) for m in margin], "beta"].tolist()
    n_random = int(sweep["random sets"].iloc[0])
    number = f"min over beta of S - random max = {printed(min(margin))} ({len(sweep)} betas, {n_random} random sets)"
    blocked = blocked_by(check, audits)
    if blocked:
        return Verdict(head_set, check, NOT_INTERPRETABLE, number, blocked)
    if not below:
        return Verdict(
            head_set, check, PASS, number, f"S steers >= {MIN_EFFECT:g} more than every random set at every beta"
        )
    reason = f"a random set comes within {MIN_EFFECT:g} of S at beta {', '.join(map(_g, below))}"
    return Verdict(head_set, check, FAIL, number, reason)


def _g(value: float) -> str:
    return f"{value:g}"


def as_frame(verdicts: list[Verdict]) -> pd.DataFrame:
    return pd.DataFrame([v.row() for v in verdicts], columns=COLUMNS)


def counts(verdicts: pd.DataFrame) -> dict[str, int]:
    """Verdict -> how many checks got it."""
    return {v: int(np.sum(verdicts["verdict"] == v)) for v in (PASS, FAIL, NOT_INTERPRETABLE, NOT_RUN)}


# ------------------------------------------------------------------ control schemes (notebook 05, issue 40)


def significant(row: dict) -> bool:
    """The unadjusted call most papers make: `judge` on the rank p before any adjustment."""
    return judge(row).outcome == BEATS


def scheme_verdicts(table: pd.DataFrame, check: str = "NCS") -> pd.DataFrame:
    """`table` (one row per scheme x setting: S, random mean, p, z, R) with, per scheme, the rank p's
    Holm-adjusted across its settings ('p Holm'), the verdict of `against_random_verdict` at that R and
    number of settings ('verdict'; no audit blocks it here) and the unadjusted call ('significant')."""
    table = table.copy()
    table["p Holm"] = table.groupby("scheme", sort=False)["p"].transform(lambda p: holm(p.to_numpy()))
    n_sets = table.groupby("scheme", sort=False)["setting"].transform("size")
    table["verdict"] = [
        against_random_verdict(row["setting"], f"{check} vs {row['scheme']}", row, int(row["R"]), int(n), []).verdict
        for row, n in zip(table.to_dict("records"), n_sets)
    ]
    table["significant"] = [significant(row) for row in table.to_dict("records")]
    return table


# ------------------------------------------------------------------ the paper's two readings of a table of sets


@dataclass(frozen=True)
class Readings:
    """A table of head-sets, each against its own random sets, read the two ways the paper reads it."""

    per_set: list[Call]  # each set's rank p among its own random sets (floor 1 / (R + 1)): Table 3, Figure 3
    family: list[Call]  # the rank p's Holm-adjusted across the table's sets: Table 10's claim at R = 250
    n_random: int  # the fewest distinct random sets of any row

    def note(self) -> str:
        """The family-wise reading's reach at this R: the smallest Holm p possible, and where the paper makes that
        claim when no set can reach ALPHA here."""
        floor = holm_floor(self.n_random, len(self.per_set))
        note = f"Holm across the {len(self.per_set)} settings at R = {self.n_random}: smallest possible p {floor:.3f}"
        if floor > ALPHA:
            note += (
                f" > {ALPHA:g}, no set can survive it (the paper's family-wise claim is Table 10, R = {R_FAMILY_WISE})"
            )
        return note


def two_readings(table: pd.DataFrame, p_column: str = "p") -> Readings:
    """`judge` on every row of `table` (S, random mean, R or distinct, `p_column`, where present random min / max):
    per set on its unadjusted rank p, and family-wise on the rank p's Holm-adjusted across the rows."""
    rows = table.to_dict("records")
    adjusted = holm(table[p_column].to_numpy())
    per_set = [judge(row, p_column) for row in rows]
    family = [judge({**row, "p Holm": p}, "p Holm", len(rows)) for row, p in zip(rows, adjusted)]
    n_random = int(table["distinct"].min()) if "distinct" in table else int(table["R"].min())
    return Readings(per_set, family, n_random)


def with_readings(table: pd.DataFrame) -> pd.DataFrame:
    """`table` with its two readings as words (verdicts.two_readings): `vs own random sets` (unadjusted rank p) and
    `family-wise` (Holm across the rows)."""
    readings = two_readings(table)
    return table.assign(
        **{
            "vs own random sets": [c.outcome for c in readings.per_set],
            "family-wise": [c.outcome for c in readings.family],
        }
    )
