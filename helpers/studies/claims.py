"""The paper's claims (abstract and key points) beside this run's numbers, read from the run's own tables.

Each claim is a record: a short paraphrase, the paper's number, the table of this run it is read from,
and a function of that table giving this run's number, a detail and whether the claim holds here by the
rule stated in `rule`. Nothing is hand-entered except the paper's numbers and the rules.

    table = claims(out_dir)                   # one row per claim
    write_results(out_dir, table, "toy ...")  # RESULTS.md: the claims and the headline numbers
"""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from helpers.runner.report import reference
from helpers.studies.verdicts import ALPHA, BEATS, MIN_EFFECT, Z_SD_FLOOR, exceeds, versus_random, z_estimable

# A claim holds, fails, or cannot be tested at this run's sizes (None).
VERDICTS = {True: "yes", False: "no", None: "not testable here (see detail)"}
# The tables the claims read, written by notebooks 02-05 into the run's out_dir.
TABLES = ("table01_overlap_by_factor", "ncs_source_contrast", "table03_cers", "table03_ncs", "table10_large_r")


@dataclass(frozen=True)
class Claim:
    name: str
    paper_says: str
    paper: str | Callable[[], str]  # the number, or a function of the paper's reference tables giving it
    table: str
    rule: str
    measure: Callable[[pd.DataFrame], tuple[float, str, bool | None]]  # table -> (this run, detail, holds)


# "About half", "most" and "almost fully" as bands of heads per 100 of the top-k, fixed before any run:
# about half is 50 +- 15, most is above that band, almost fully is 90 or more.
ABOUT_HALF = (35.0, 65.0)
MOST = 65.0
ALMOST_FULLY = 90.0


def _overlap(table: pd.DataFrame, comparison: str) -> float:
    """Median overlap of `comparison` as heads per 100 of the top-k (comparable with the paper's top-100)."""
    return 100 * float(table.set_index("comparison").loc[comparison, "median share of k"])


def _half_split_noise(table: pd.DataFrame) -> float:
    """The half-split agreement's own spread, per 100 of the top-k: half the range of the settings'
    half-split overlaps. A margin smaller than this is within the discovery data's noise."""
    row = table.set_index("comparison").loc["half-split"]
    per_100 = 100 * float(row["median share of k"]) / float(row["median overlap"])
    return per_100 * (float(row["max"]) - float(row["min"])) / 2


def _both(level: bool, order: bool) -> bool:
    return level and order


def _about_half(comparison: str):
    """Level (inside ABOUT_HALF) and ordering (below the corpus overlap), checked separately."""

    def measure(table):
        value, corpus = _overlap(table, comparison), _overlap(table, "corpus")
        level, order = ABOUT_HALF[0] <= value <= ABOUT_HALF[1], value < corpus
        detail = (
            f"level: {comparison} {value:.1f} per 100 {'inside' if level else 'outside'} "
            f"{ABOUT_HALF[0]:g}-{ABOUT_HALF[1]:g}; order: {'below' if order else 'not below'} corpus {corpus:.1f}"
        )
        return value, detail, _both(level, order)

    return measure


def _corpus_most(table):
    corpus = _overlap(table, "corpus")
    others = max(_overlap(table, "source"), _overlap(table, "query"))
    level, order = corpus > MOST, corpus > others
    detail = (
        f"level: corpus {corpus:.1f} per 100 {'above' if level else 'not above'} {MOST:g}; "
        f"order: {'above' if order else 'not above'} source/query (at most {others:.1f})"
    )
    return corpus, detail, _both(level, order)


def _half_split_highest(table):
    half = _overlap(table, "half-split")
    factors = max(_overlap(table, c) for c in ("source", "query", "corpus"))
    noise = _half_split_noise(table)
    level, order = half >= ALMOST_FULLY, half - factors > noise
    detail = (
        f"level: half-split {half:.1f} per 100 {'>=' if level else '<'} {ALMOST_FULLY:g}; order: margin over the "
        f"factor changes (at most {factors:.1f}) {half - factors:.1f} {'>' if order else '<='} the half-split "
        f"noise {noise:.1f}"
    )
    return half, detail, _both(level, order)


def _source_contrast(table):
    row = table.set_index("comparison").loc["qsp - last"]
    difference, p = float(row["mean difference"]), float(row["p (paired t)"])
    holds = p < ALPHA and exceeds(difference)
    detail = f"difference {difference:.3f} (minimum effect {MIN_EFFECT:g}), paired t p = {p:.2g}"
    return difference, detail, holds


def _large_r_z(table):
    """z >= 17 for both sets, where z is estimable (random SD >= Z_SD_FLOOR); not testable otherwise."""
    z, sd = table["z"].astype(float), table["random sd"].astype(float)
    estimable = [z_estimable(v) for v in sd]
    detail = "; ".join(
        f"{s} z = {v:.1f} at R = {r}" if ok else f"{s}: z not estimable (random SD {d:.2g} < {Z_SD_FLOOR:g})"
        for s, v, d, r, ok in zip(table.setting, z, sd, table.R, estimable)
    )
    if not all(estimable):
        return float("nan"), detail, None
    return float(z.min()), detail, bool(z.min() >= 17)


def _paper_z() -> str:
    paper = reference("table10_large_r")
    z = (paper.paper_NCS - paper.paper_random_mean) / paper.paper_random_sd
    return f"17-19 (from its rounded Table 10: {', '.join(f'{v:.1f}' for v in z)})"


def _holm(table):
    adjusted, r_values = table["p Holm (12 settings)"].astype(float), table["Holm R's"].iloc[0]
    effects = table["S"].astype(float) - table["random mean"].astype(float)
    outcomes = [versus_random(p, e) for p, e in zip(adjusted, effects)]
    detail = f"Holm over 12 settings at R = {r_values}: " + ", ".join(
        f"{s} p {p:.3f}, effect {e:.3f}: {o}" for s, p, e, o in zip(table.setting, adjusted, effects, outcomes)
    )
    return float(adjusted.max()), detail, all(o == BEATS for o in outcomes)


def _cers_rank_p(table):
    """The paper: every rank p >= .14. Here: no set beats its random sets by the rule of `versus_random`
    at the paper's threshold .14; not testable where R is so small that even a set above every random set
    has p >= .14."""
    effects = table["S"] - table["random mean"]
    beating = [
        s for s, p, e in zip(table.setting, table.p, effects) if versus_random(p, e, alpha=0.14 - 1e-9) == BEATS
    ]
    testable = 1 / (table.R.min() + 1) < 0.14
    detail = f"{len(beating)} of {len(table)} with rank p < .14 and effect >= {MIN_EFFECT:g}" + (
        f": {', '.join(beating)}" if beating else ""
    )
    return float(len(beating)), detail, (not beating) if testable else None


def _any_layer_span(table):
    inside = (table["S"] >= table["any-layer min"]) & (table["S"] <= table["any-layer max"])
    outside = list(table.setting[~inside])
    detail = f"{int(inside.sum())} of {len(table)} inside their any-layer range" + (
        f"; outside: {', '.join(outside)}" if outside else ""
    )
    return float(inside.sum()), detail, bool(inside.all())


CLAIMS = (
    Claim("source overlap", "changing the attention source keeps about half of the top heads", "49 / 100",
          "table01_overlap_by_factor", f"{ABOUT_HALF[0]:g}-{ABOUT_HALF[1]:g} per 100, and below the corpus overlap",
          _about_half("source")),
    Claim("query overlap", "changing the query type keeps about half of the top heads", "55 / 100",
          "table01_overlap_by_factor", f"{ABOUT_HALF[0]:g}-{ABOUT_HALF[1]:g} per 100, and below the corpus overlap",
          _about_half("query")),
    Claim("corpus overlap", "changing the corpus keeps most of the top heads", "84 / 100",
          "table01_overlap_by_factor", f"> {MOST:g} per 100, and above the source and query overlaps", _corpus_most),
    Claim("half-split overlap", "two halves of the same discovery data agree almost fully", "96-99 / 100",
          "table01_overlap_by_factor",
          f">= {ALMOST_FULLY:g} per 100, and above every factor's by more than the half-split noise",
          _half_split_highest),
    Claim("necessity follows the source", "query-span sets are more necessary than last-token sets",
          "0.083, p = 6e-10", "ncs_source_contrast",
          f"NCS(qsp) - NCS(last) >= {MIN_EFFECT:g} with paired p < {ALPHA:g}", _source_contrast),
    Claim("ref-qsp far above random", "the two referring + query-span sets lie far above 250 random sets",
          _paper_z, "table10_large_r", f"both z >= 17 (the paper's lower bound); a z whose random SD is below "
          f"{Z_SD_FLOOR:g} is not estimable", _large_r_z),
    Claim("Holm across 12 settings", "the two referring + query-span sets survive Holm across the 12 settings",
          "0.048", "table10_large_r", f"both beat random: Holm p <= {ALPHA:g} and effect >= {MIN_EFFECT:g}", _holm),
    Claim("no steering advantage", "no discovered set steers better than its layer-matched random sets",
          "rank p >= 0.14", "table03_cers", f"no setting with rank p < .14 and effect >= {MIN_EFFECT:g}",
          _cers_rank_p),
    Claim("any-layer sets span S", "random sets from any layer span the discovered sets' steering scores",
          "all 12", "table03_cers", "every S within [min, max] of its any-layer sets", _any_layer_span),
)  # fmt: skip


def claims(out_dir: Path, names: tuple[str, ...] | None = None) -> pd.DataFrame:
    """One row per claim (those in `names`, default all): the paper's words and number, this run's number
    and detail, and the verdict. Reads only the tables the chosen claims rest on."""
    chosen = _chosen(names)
    return claim_rows({c.table: pd.read_csv(Path(out_dir) / f"{c.table}.csv") for c in chosen}, names)


def _chosen(names: tuple[str, ...] | None) -> list[Claim]:
    unknown = set(names or ()) - {c.name for c in CLAIMS}
    if unknown:
        raise ValueError(f"unknown claims {sorted(unknown)}; the claims are {[c.name for c in CLAIMS]}")
    return [c for c in CLAIMS if names is None or c.name in names]


def claim_rows(
    tables: dict[str, pd.DataFrame], names: tuple[str, ...] | None = None, untested: dict[str, str] | None = None
) -> pd.DataFrame:
    """The claims table from tables in hand ({table name: frame}). A claim named in `untested` ({claim: why})
    is "not testable here" with that reason, without reading its table."""
    rows = []
    for claim in _chosen(names):
        if claim.name in (untested or {}):
            value, detail, holds = float("nan"), untested[claim.name], None
        else:
            value, detail, holds = claim.measure(tables[claim.table])
        rows.append(
            {
                "claim": claim.name,
                "paper says": claim.paper_says,
                "paper": claim.paper() if callable(claim.paper) else claim.paper,
                "this run": value,
                "detail": detail,
                "rule": claim.rule,
                "holds": VERDICTS[holds],
                "table": claim.table,
            }
        )
    return pd.DataFrame(rows)


SAID = {"yes": "holds here", "no": "does not hold here"}


def sentences(out_dir: Path, names: tuple[str, ...]) -> str:
    """The named claims as sentences a notebook prints: the paper's claim as the paper's, then this run's
    numbers and the verdict of the claim's rule, generated from the run's tables."""
    lines = []
    for row in claims(out_dir, names).itertuples(index=False):
        said = SAID.get(row.holds, "is not testable here")
        lines.append(f"The paper: {row[1]} ({row.paper}). This run: {row.detail}; by the rule '{row.rule}' it {said}.")
    return "\n".join(lines)


def _markdown(table: pd.DataFrame) -> str:
    """A pandas table as a markdown table (cells as written, floats with 4 significant digits)."""
    cells = [[f"{v:.4g}" if isinstance(v, float) else str(v) for v in row] for row in table.itertuples(index=False)]
    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in cells])


def _largest(table: pd.DataFrame) -> str:
    best = table.loc[table.S.idxmax()]
    return f"{best.S:.3f} ({best.setting}, p = {best.p:.3f} at R = {best.R})"


def _at_floor(table: pd.DataFrame) -> str:
    """How many settings reach the smallest rank p their R allows (S above every random set). The tables
    hold p at 3 decimals (1 / 21 is written 0.048), so the floor is compared at that precision."""
    floor = (1 / (table.R + 1)).round(3)
    return f"{int((table.p <= floor + 1e-9).sum())} of {len(table)}"


def headlines(out_dir: Path) -> pd.DataFrame:
    """The headline numbers of the run, each read from one of its tables."""
    out_dir = Path(out_dir)
    ncs3 = pd.read_csv(out_dir / "table03_ncs.csv")
    cers3 = pd.read_csv(out_dir / "table03_cers.csv")
    large = pd.read_csv(out_dir / "table10_large_r.csv")
    rows = [
        ("largest NCS (Table 3)", _largest(ncs3)),
        ("smallest NCS Holm p (Table 3)", f"{ncs3['p Holm'].min():.3f}"),
        ("NCS settings at their rank-p floor", _at_floor(ncs3)),
        ("largest CERS (Table 3)", _largest(cers3)),
        ("CERS settings at their rank-p floor", _at_floor(cers3)),
        *(
            (f"{r.setting} against R = {r.R} (Table 10)", f"NCS {r.S:.3f}, random {r['random mean']:.4f} ± "
             f"{r['random sd']:.4f}, z = {r.z:.1f}{' (capped)' if r['z capped'] else ''}, p = {r.p:.4f}")
            for _, r in large.iterrows()
        ),
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=["quantity", "this run"])


def write_results(out_dir: Path, table: pd.DataFrame, run: str) -> Path:
    """RESULTS.md in out_dir: the run, its headline numbers and the claims table; returns its path."""
    shown = table.drop(columns=["table"])
    text = "\n\n".join(
        [
            "# Results of this run",
            f"Run: {run}. Generated by notebook 05_controls from the run's own tables (helpers/studies/claims.py).",
            "## Headline numbers",
            _markdown(headlines(out_dir)),
            "## The paper's claims on this run",
            _markdown(shown),
        ]
    )
    path = Path(out_dir) / "RESULTS.md"
    path.write_text(text + "\n")
    return path
