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

# A claim holds, fails, or cannot be tested at this run's sizes (None).
VERDICTS = {True: "yes", False: "no", None: "not testable at this R"}
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


def _overlap(table: pd.DataFrame, comparison: str) -> float:
    """Median overlap of `comparison` as heads per 100 of the top-k (comparable with the paper's top-100)."""
    return 100 * float(table.set_index("comparison").loc[comparison, "median share of k"])


def _overlap_claim(comparison: str, below: str):
    def measure(table):
        value, other = _overlap(table, comparison), _overlap(table, below)
        return value, f"{comparison} {value:.1f} vs {below} {other:.1f} per 100", value < other

    return measure


def _corpus_least(table):
    corpus = _overlap(table, "corpus")
    others = max(_overlap(table, "source"), _overlap(table, "query"))
    return corpus, f"corpus {corpus:.1f} vs source/query at most {others:.1f} per 100", corpus > others


def _half_split_highest(table):
    half = _overlap(table, "half-split")
    factors = max(_overlap(table, c) for c in ("source", "query", "corpus"))
    return half, f"half-split {half:.1f} vs factor changes at most {factors:.1f} per 100", half >= factors


def _source_contrast(table):
    row = table.set_index("comparison").loc["qsp - last"]
    difference, p = float(row["mean difference"]), float(row["p (paired t)"])
    return difference, f"difference {difference:.3f}, paired t p = {p:.2g}", difference > 0 and p < 0.05


def _large_r_z(table):
    z, capped = table["z"].astype(float), table["z capped"].astype(bool)
    detail = ", ".join(
        f"{s} z = {v:.1f}{' (capped: random SD about 0)' if c else ''} at R = {r}"
        for s, v, c, r in zip(table.setting, z, capped, table.R)
    )
    return float(z.min()), detail, bool(z.min() >= 17)


def _paper_z() -> str:
    paper = reference("table10_large_r")
    z = (paper.paper_NCS - paper.paper_random_mean) / paper.paper_random_sd
    return f"17-19 (from its rounded Table 10: {', '.join(f'{v:.1f}' for v in z)})"


def _holm(table):
    adjusted, r_values = table["p Holm (12 settings)"].astype(float), table["Holm R's"].iloc[0]
    detail = f"Holm over 12 settings at R = {r_values}: {', '.join(f'{v:.3f}' for v in adjusted)}"
    return float(adjusted.max()), detail, bool(adjusted.max() <= 0.05)


def _cers_rank_p(table):
    """Not testable where R is so small that even a set above every random set has p >= .14."""
    low = table.loc[table.p.idxmin()]
    testable = 1 / (table.R.min() + 1) < 0.14
    return (
        float(low.p),
        f"smallest rank p {low.p:.3f} ({low.setting}, R = {low.R})",
        bool(low.p >= 0.14) if testable else None,
    )


def _any_layer_span(table):
    inside = (table["S"] >= table["any-layer min"]) & (table["S"] <= table["any-layer max"])
    outside = list(table.setting[~inside])
    detail = f"{int(inside.sum())} of {len(table)} inside their any-layer range" + (
        f"; outside: {', '.join(outside)}" if outside else ""
    )
    return float(inside.sum()), detail, bool(inside.all())


CLAIMS = (
    Claim("source overlap", "changing the attention source keeps about half of the top heads", "49 / 100",
          "table01_overlap_by_factor", "source overlap < corpus overlap", _overlap_claim("source", "corpus")),
    Claim("query overlap", "changing the query type keeps about half of the top heads", "55 / 100",
          "table01_overlap_by_factor", "query overlap < corpus overlap", _overlap_claim("query", "corpus")),
    Claim("corpus overlap", "changing the corpus keeps most of the top heads", "84 / 100",
          "table01_overlap_by_factor", "corpus overlap > source and query overlaps", _corpus_least),
    Claim("half-split overlap", "two halves of the same discovery data agree almost fully", "96-99 / 100",
          "table01_overlap_by_factor", "half-split overlap >= every factor's", _half_split_highest),
    Claim("necessity follows the source", "query-span sets are more necessary than last-token sets",
          "0.083, p = 6e-10", "ncs_source_contrast", "NCS(qsp) - NCS(last) > 0 with paired p < .05",
          _source_contrast),
    Claim("ref-qsp far above random", "the two referring + query-span sets lie far above 250 random sets",
          _paper_z, "table10_large_r", "both z >= 17 (the paper's lower bound)", _large_r_z),
    Claim("Holm across 12 settings", "the two referring + query-span sets survive Holm across the 12 settings",
          "0.048", "table10_large_r", "Holm-adjusted p <= .05 for both", _holm),
    Claim("no steering advantage", "no discovered set steers better than its layer-matched random sets",
          "rank p >= 0.14", "table03_cers", "every setting's CERS rank p >= .14", _cers_rank_p),
    Claim("any-layer sets span S", "random sets from any layer span the discovered sets' steering scores",
          "all 12", "table03_cers", "every S within [min, max] of its any-layer sets", _any_layer_span),
)  # fmt: skip


def claims(out_dir: Path) -> pd.DataFrame:
    """One row per claim: the paper's words and number, this run's number and detail, and the verdict."""
    tables = {name: pd.read_csv(Path(out_dir) / f"{name}.csv") for name in TABLES}
    rows = []
    for claim in CLAIMS:
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
