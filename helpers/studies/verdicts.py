"""Verdicts of the report card: one row per check, pass / fail / not interpretable / not run, with the
number it rests on and the reason.

Rules (the thresholds are named constants, so a report states what it applied):

- baseline audit (Table 22): each clean P(correct) must lie in AUDIT_RANGES; a check that depends on an
  audit out of range (DEPENDS_ON) is "not interpretable", never scored;
- every comparison counts a difference as an effect only when it reaches MIN_EFFECT (exceeds), never on a
  float-noise margin;
- against random sets (`versus_random`, the rule of every notebook and claim too): pass when the
  Holm-adjusted rank p <= ALPHA and S exceeds the random sets' mean by MIN_EFFECT; "not interpretable"
  when even the
  best possible rank (S above every random set) could not reach ALPHA after Holm (too few random sets
  for the number of head-sets), since then a fail says nothing about the set;
- the half-split noise ceiling: pass when the two halves of the discovery data share >= CEILING_SHARE of
  the top-k;
- generic damage: pass when S's NCS interval lies MIN_EFFECT above the NCS of every generic-damage set;
- the beta sweep: pass when S steers MIN_EFFECT more than every one of its random sets at every beta.
"""

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from helpers.measures.stats import holm
from helpers.runner.sizes import CONTROL_SCHEMES

PASS, FAIL, NOT_INTERPRETABLE, NOT_RUN = "pass", "fail", "not interpretable", "not run"
ALPHA = 0.05
AUDIT_RANGES = {"oracle": (0.85, 1.0), "blank": (0.15, 0.35), "matched": (0.85, 1.0), "mismatched": (0.15, 0.35)}
AUDIT_EXPECTED = {"oracle": "~1", "blank": "~0.25", "matched": "~1", "mismatched": "~0.25"}
CEILING_SHARE = 0.8
# The smallest difference in P(correct), or in a score made of such differences (NCS, CERS), that a verdict
# counts as an effect: one percentage point. The tables print three decimals, so it shows as >= 0.010;
# below it lie float noise (~1e-6 where both sides are ~0) and changes no reader would call an effect.
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
    """`difference` counts as an effect: it reaches `minimum` (a tie is anything closer to 0 than that)."""
    return bool(difference >= minimum)


BEATS, BELOW_MINIMUM, WITHIN = "beats random", "below the minimum effect", "within random"
# A z needs random sets that vary: below this SD (a tenth of MIN_EFFECT) the random sets sit at float noise
# and z = (S - mean) / SD measures that noise, not S (the tables cap and flag it at Z_CAP).
Z_SD_FLOOR = MIN_EFFECT / 10


def versus_random(p: float, effect: float, alpha: float = ALPHA, minimum: float = MIN_EFFECT) -> str:
    """The one rule by which a head-set beats its random sets, in 03-07, the claims and the report card:
    its (Holm-adjusted, where several sets are tested) rank p is at most `alpha` AND its effect (S minus
    the random sets' mean) reaches `minimum`. A p at its floor with an effect below the minimum is a tie at
    the tables' precision (BELOW_MINIMUM), never a win."""
    if p <= alpha and exceeds(effect, minimum):
        return BEATS
    return BELOW_MINIMUM if p <= alpha else WITHIN


def z_estimable(random_sd: float) -> bool:
    """A z-score means something: the random sets' SD reaches Z_SD_FLOOR."""
    return bool(random_sd >= Z_SD_FLOOR)


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
    """Verdict of S against R random sets from a row with S, random mean, p, p Holm and z."""
    floor = holm_floor(n_random, n_sets)
    number = (
        f"S {row['S']:.3f} vs random {row['random mean']:.3f}; rank p {row['p']:.3f} "
        f"(Holm {row['p Holm']:.3f}, floor {floor:.3f}, R = {n_random}); z {row['z']:.1f}"
    )
    blocked = blocked_by(check, audits)
    if blocked:
        return Verdict(head_set, check, NOT_INTERPRETABLE, number, blocked)
    effect = row["S"] - row["random mean"]
    outcome = versus_random(row["p Holm"], effect)
    if outcome == BEATS:
        return Verdict(head_set, check, PASS, number, f"Holm-adjusted rank p <= {ALPHA}, effect >= {MIN_EFFECT:g}")
    if outcome == BELOW_MINIMUM:
        reason = f"rank p <= {ALPHA} but S exceeds the random mean by {effect:.4f} < the minimum effect {MIN_EFFECT:g}"
        return Verdict(head_set, check, FAIL, number, reason)
    if floor > ALPHA:
        reason = (
            f"with R = {n_random} and {n_sets} head-set(s) no rank p can reach {ALPHA} after Holm; "
            "use more random sets"
        )
        return Verdict(head_set, check, NOT_INTERPRETABLE, number, reason)
    return Verdict(head_set, check, FAIL, number, f"Holm-adjusted rank p > {ALPHA}: S is within its random sets")


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
    number = f"S's NCS low {s_low:.3f} vs {worst['damage set']} {worst['NCS']:.3f} (the largest of {len(others)})"
    blocked = blocked_by(check, audits)
    if blocked:
        return Verdict(head_set, check, NOT_INTERPRETABLE, number, blocked)
    if exceeds(s_low - worst["NCS"]):
        return Verdict(
            head_set, check, PASS, number, f"S's necessity exceeds every generic-damage set's by >= {MIN_EFFECT:g}"
        )
    return Verdict(head_set, check, FAIL, number, f"a generic-damage set comes within {MIN_EFFECT:g} of S's necessity")


def sweep_verdict(head_set: str, sweep: pd.DataFrame, audits: list[Verdict]) -> Verdict:
    """Verdict of the beta sweep: S above every random set's CERS at every beta."""
    check = "CERS beta sweep"
    margin = sweep["S"] - sweep["random max"]
    below = sweep.loc[[not exceeds(m) for m in margin], "beta"].tolist()
    n_random = int(sweep["random sets"].iloc[0])
    number = f"min over beta of S - random max = {margin.min():.4f} ({len(sweep)} betas, {n_random} random sets)"
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
    """The unadjusted call most papers make: `versus_random` on the rank p before any adjustment."""
    return versus_random(row["p"], row["S"] - row["random mean"]) == BEATS


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
