"""The paper's claims (abstract and key points) beside this run's numbers, read from the run's own tables.

Each claim is a record: a short paraphrase, the paper's number, the table of this run it is read from,
and a function of that table giving this run's number, a detail and whether the claim holds here by the
rule stated in `rule`. Nothing is hand-entered except the paper's numbers and the rules. Each rule is as
strong as the paper's words (its docstring quotes them), and every call against random sets is
`verdicts.judge`'s. A claim that reads a table a later notebook writes (06's Table 19) is "not testable" until
that notebook has run.

    table = claims(out_dir)                   # one row per claim
    write_results(out_dir, table, "toy ...")  # RESULTS.md: the claims and the headline numbers
"""

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from helpers.figures.writers import save_table
from helpers.measures.printed import printed
from helpers.measures.verdicts import (
    ALPHA,
    BEATS,
    MIN_EFFECT,
    NOT_INTERPRETABLE,
    WITHIN,
    in_range,
    judge,
    p_at_least,
    paired_difference,
    two_readings,
)
from helpers.storage.paths import toy_folder
from helpers.storage.reference import reference

# A claim holds, fails, or cannot be tested at this run's sizes (None).
VERDICTS = {True: "yes", False: "no", None: "not testable here (see detail)"}
# The tables the claims read, written by notebooks 02-05 into the run's out_dir.
TABLES = (
    "table01_overlap_by_factor",
    "ncs_source_contrast",
    "table03_cers",
    "table03_ncs",
    "table10_large_r",
    "table19_second_model",
)


@dataclass(frozen=True)
class Claim:
    name: str
    paper_says: str
    paper: str | Callable[[], str]  # the number, or a function of the paper's reference tables giving it
    table: str | tuple[str, ...]  # the table it reads, or several (then `measure` takes them in this order)
    rule: str
    measure: Callable[..., tuple[float, str, bool | None]]  # table(s) -> (this run, detail, holds)


# "About half" and "most" as bands of heads per 100 of the top-k, fixed before any run: about half is 50 +- 15,
# most is above that band. "Share 96-99" is at least 95; "far more" is a margin of at least half the paper's
# smaller one (corpus 84 - query 55 = 29).
ABOUT_HALF = (35.0, 65.0)
MOST = 65.0
HALVES_SHARE = 95.0
FAR_MORE = 15.0
# "17-19 SD above 250 random sets": the paper's Table 10 gives z = 16.3 and 18.1, at R = 250.
Z_FAR, R_FAR = 16.0, 250
STEER_P = 0.14  # "rank p >= .14"


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
    """ "Changing the corpus keeps most of the top heads": the corpus overlap above the MOST band."""
    corpus = _overlap(table, "corpus")
    level = corpus > MOST
    return corpus, f"corpus {corpus:.1f} per 100 {'above' if level else 'not above'} {MOST:g}", level


def _reshape_far_more(table):
    """ "The source and the query reshape the heads far more than the corpus": both margins (corpus overlap minus
    the source's, minus the query's) at least FAR_MORE per 100 and above the half-split noise."""
    corpus, noise = _overlap(table, "corpus"), _half_split_noise(table)
    margins = {factor: corpus - _overlap(table, factor) for factor in ("source", "query")}
    detail = ", ".join(f"corpus - {f} {m:.1f}" for f, m in margins.items()) + (
        f" per 100 (each must reach {FAR_MORE:g} and exceed the half-split noise {noise:.1f})"
    )
    smallest = min(margins.values())
    return smallest, detail, bool(smallest >= FAR_MORE and smallest > noise)


def _halves_share(table):
    """ "Two halves of the same data share 96-99" of the top heads: the half-split overlap at least HALVES_SHARE."""
    half = _overlap(table, "half-split")
    return (
        half,
        f"half-split {half:.1f} per 100 {'>=' if half >= HALVES_SHARE else '<'} {HALVES_SHARE:g}",
        (half >= HALVES_SHARE),
    )


def _source_contrast(table):
    """ "Query-span sets are more necessary than last-token ones": the pooled paired difference (all query-span
    sets against all last-token sets) at least MIN_EFFECT with p < ALPHA, AND in each query type (ordinal,
    referring) the query-span sets above the last-token ones by the same rule, so the pooled difference cannot
    rest on one query type."""
    rows = table.set_index("comparison")
    names = ["qsp - last", *(c for c in rows.index if c.startswith("qsp - last ("))]
    calls = {c: paired_difference(rows.loc[c, "p (paired t)"], rows.loc[c, "mean difference"]) for c in names}
    detail = "; ".join(
        f"{c}: difference {printed(rows.loc[c, 'mean difference'])}, paired t p = {rows.loc[c, 'p (paired t)']:.2g}"
        f" ({'holds' if ok else 'fails'})"
        for c, ok in calls.items()
    )
    if len(names) < 3:
        return float(rows.loc["qsp - last", "mean difference"]), detail + "; no per-query-type rows", None
    return float(rows.loc["qsp - last", "mean difference"]), detail, all(calls.values())


def _large_r_z(table):
    """ "The two referring + query-span sets lie 17-19 SD above 250 layer-matched random sets": both z at least
    Z_FAR at R = R_FAR; not testable at a smaller R, where a z is not estimable (verdicts.judge on z), or
    where the run holds fewer than the two sets."""
    rows = table.to_dict("records")
    calls = [judge(row, on_z=True) for row in rows]
    detail = "; ".join(
        f"{row['setting']} z = {printed(row['z'], 1)} at R = {row['R']}"
        if call.outcome != NOT_INTERPRETABLE
        else f"{row['setting']}: {call.text}"
        for row, call in zip(rows, calls)
    )
    if len(rows) < 2:
        return float("nan"), detail + f"; {len(rows)} of the 2 sets in this run", None
    if min(int(row["R"]) for row in rows) < R_FAR:
        return float("nan"), detail + f"; the claim is at R = {R_FAR}", None
    if any(call.outcome == NOT_INTERPRETABLE for call in calls):
        return float("nan"), detail, None
    z = min(float(row["z"]) for row in rows)
    return z, detail, z >= Z_FAR


def _paper_z() -> str:
    paper = reference("table10_large_r")
    z = (paper.paper_NCS - paper.paper_random_mean) / paper.paper_random_sd
    return f"17-19 (from its rounded Table 10: {', '.join(f'{v:.1f}' for v in z)})"


def _holm(table):
    """ "The two referring + query-span sets survive Holm across the 12 settings": both beat random by
    verdicts.judge on the Holm-adjusted p across 12."""
    r_values = table["Holm R's"].iloc[0]
    calls = [judge(row, "p Holm (12 settings)", 12) for row in table.to_dict("records")]
    detail = f"Holm over 12 settings at R = {r_values}: " + ", ".join(
        f"{s}: {c.outcome} ({c.text})" for s, c in zip(table.setting, calls)
    )
    return float(table["p Holm (12 settings)"].max()), detail, _all_beat(calls)


def _all_beat(calls) -> bool | None:
    """All calls beat random (True), one is within random (False), else one is not interpretable (None)."""
    if any(c.outcome == WITHIN for c in calls):
        return False
    return None if any(c.outcome == NOT_INTERPRETABLE for c in calls) else True


def _cers_rank_p(table):
    """ "No discovered set steers better than its layer-matched random sets (rank p >= .14)": every set's rank p
    at least STEER_P, whatever its effect; not testable where R is so small that even a set above every random
    set has p >= STEER_P."""
    low = table.loc[[not p_at_least([p], STEER_P) for p in table.p], "setting"].tolist()
    testable = not p_at_least([1 / (table.R.min() + 1)], STEER_P)
    detail = f"{len(low)} of {len(table)} with rank p < {STEER_P:g}" + (f": {', '.join(low)}" if low else "")
    return float(len(low)), detail, (not low) if testable else None


def _random_span(table):
    """ "Random sets from the same or from any layer span the discovered sets' scores": each S inside the range
    of its layer-matched and of its any-layer sets (verdicts.in_range: at the printed precision; a tie at the
    range's edge with a range narrower than MIN_EFFECT is not interpretable, and so is the claim then)."""
    calls = {
        (s, control): in_range(row["S"], row[f"{prefix} min"], row[f"{prefix} max"])
        for s, row in table.set_index("setting").iterrows()
        for control, prefix in (("layer-matched", "random"), ("any-layer", "any-layer"))
    }
    inside = sum(1 for v in calls.values() if v is True)
    outside = [f"{s} ({c})" for (s, c), v in calls.items() if v is False]
    tied = [f"{s} ({c})" for (s, c), v in calls.items() if v is None]
    edge = [f"{s} ({c})" for (s, c), v in calls.items() if v is True and _at_edge(table, s, c)]
    named = (
        (f"of them at an edge of a range >= {MIN_EFFECT:g} wide", edge),
        ("outside", outside),
        ("tied at an edge", tied),
    )
    detail = f"{inside} of {len(calls)} inside their range" + "".join(
        f"; {what}: {', '.join(names)}" for what, names in named if names
    )
    holds = False if outside else (None if tied else True)
    return float(inside), detail, holds


def _at_edge(table: pd.DataFrame, setting: str, control: str) -> bool:
    """S prints as its random range's min or max (three decimals): inside, but only just."""
    row = table.set_index("setting").loc[setting]
    prefix = "random" if control == "layer-matched" else "any-layer"
    return f"{row['S']:.3f}" in (f"{row[f'{prefix} min']:.3f}", f"{row[f'{prefix} max']:.3f}")


def _separates(contrast, cers):
    """ "Necessity separates the settings, steering does not", as the paper argues it: NCS differs between the
    settings (the source contrast's pooled paired test, query-span minus last-token sets: at least MIN_EFFECT with
    p < ALPHA, verdicts.paired_difference) and no discovered set steers better than its layer-matched random sets
    (every CERS rank p >= STEER_P, as the "no steering advantage" claim). Testable wherever R lets a rank p fall
    below STEER_P; no Holm family is needed, so it is testable at the default sizes."""
    row = contrast.set_index("comparison").loc["qsp - last"]
    difference, p = float(row["mean difference"]), float(row["p (paired t)"])
    ncs_differs = paired_difference(p, difference)
    _, steer_detail, no_steering = _cers_rank_p(cers)
    detail = (
        f"NCS: qsp - last {printed(difference)}, paired t p = {p:.2g} "
        f"({'differs' if ncs_differs else 'does not differ'}); CERS: {steer_detail}"
    )
    if no_steering is None:
        return difference, detail + f" (R too small for a rank p below {STEER_P:g})", None
    return difference, detail, bool(ncs_differs and no_steering)


REPLICATE_SETTING, REPLICATE_MODELS = "referring + query span", 2


def _lineage(model: str) -> str:
    """What one replication counts as: a pretrained model itself; a toy its architecture family ("toy qwen2_vl"),
    as every toy trains on the one curriculum of helpers/toy/README.md, so toys of one family are siblings."""
    folder = toy_folder(model)
    if folder is None:
        return model
    return f"toy {json.loads((folder / 'config.json').read_text())['model_type']}"


def _replicates(table):
    """ "The referring + query-span effect replicates on several recent VLMs": that set's NCS beats random
    (verdicts.judge, unadjusted, as 06's Table 19) on at least REPLICATE_MODELS pretrained models other than the
    run's default (06's first model), counting only models that pass the baseline audit. Toys are no recent VLMs:
    they are reported, each family once and the default's family left out (its siblings replicate nothing), but
    not counted; with fewer than REPLICATE_MODELS further pretrained models the claim is not testable here."""
    models = list(dict.fromkeys(table.model))
    rows = table[(table.setting == REPLICATE_SETTING) & (table.model != models[0])]
    passing = rows[rows.audit == "passes"]
    calls = [judge({**row, "S": row["NCS"]}) for row in passing.to_dict("records")]
    beats = {m for m, c in zip(passing.model, calls) if c.outcome == BEATS}
    pretrained = [m for m in passing.model if toy_folder(m) is None]
    vlms = [m for m in pretrained if m in beats]
    families = {}  # toy family other than the default's -> its toys that beat random
    for model in passing.model:
        if toy_folder(model) is not None and _lineage(model) != _lineage(models[0]):
            families.setdefault(_lineage(model), []).extend([model] if model in beats else [])
    toys = "; ".join(f"{family}: {', '.join(found) or 'none'}" for family, found in families.items()) or "none run"
    detail = (
        f"{REPLICATE_SETTING} NCS beats random on {len(vlms)} of {len(pretrained)} further pretrained models passing "
        f"the audit ({', '.join(vlms) or 'none'}); toys of this project's one curriculum, not recent VLMs, per "
        f"family other than the default's ({_lineage(models[0])}): {toys}"
    )
    if len(pretrained) < REPLICATE_MODELS:
        return float(len(vlms)), detail + f" (fewer than {REPLICATE_MODELS} further pretrained models)", None
    return float(len(vlms)), detail, len(vlms) >= REPLICATE_MODELS


CLAIMS = (
    Claim("source overlap", "changing the attention source keeps about half of the top heads", "49 / 100",
          "table01_overlap_by_factor", f"{ABOUT_HALF[0]:g}-{ABOUT_HALF[1]:g} per 100, and below the corpus overlap",
          _about_half("source")),
    Claim("query overlap", "changing the query type keeps about half of the top heads", "55 / 100",
          "table01_overlap_by_factor", f"{ABOUT_HALF[0]:g}-{ABOUT_HALF[1]:g} per 100, and below the corpus overlap",
          _about_half("query")),
    Claim("corpus overlap", "changing the corpus keeps most of the top heads", "84 / 100",
          "table01_overlap_by_factor", f"> {MOST:g} per 100", _corpus_most),
    Claim("source and query reshape more", "the source and the query reshape the heads far more than the corpus",
          "84 - 49 = 35, 84 - 55 = 29", "table01_overlap_by_factor",
          f"both margins (corpus - source, corpus - query) >= {FAR_MORE:g} per 100 and above the half-split noise",
          _reshape_far_more),
    Claim("half-split overlap", "two halves of the same discovery data share 96-99 of the top heads",
          "96-99 / 100", "table01_overlap_by_factor", f">= {HALVES_SHARE:g} per 100", _halves_share),
    Claim("necessity follows the source", "query-span sets are more necessary than last-token sets",
          "0.083, p = 6e-10", "ncs_source_contrast",
          f"NCS(qsp) - NCS(last) >= {MIN_EFFECT:g} with paired p < {ALPHA:g}, pooled and in each query type",
          _source_contrast),
    Claim("ref-qsp far above random", "the two referring + query-span sets lie 17-19 SD above 250 random sets",
          _paper_z, "table10_large_r", f"both z >= {Z_FAR:g} at R = {R_FAR} (the paper's Table 10: 16.3, 18.1); "
          "not testable at a smaller R, with a z not estimable, or with fewer than the two sets", _large_r_z),
    Claim("Holm across 12 settings", "the two referring + query-span sets survive Holm across the 12 settings",
          "0.048", "table10_large_r", "both beat random by verdicts.judge on the Holm p across 12", _holm),
    Claim("no steering advantage", "no discovered set steers better than its layer-matched random sets",
          "rank p >= 0.14", "table03_cers", f"every setting's rank p >= {STEER_P:g}, whatever its effect",
          _cers_rank_p),
    Claim("random sets span S", "random sets from the same or from any layer span the discovered sets' scores",
          "all 12", "table03_cers", "every S within [min, max] of its layer-matched and of its any-layer sets "
          f"(a tie at an edge of a range narrower than {MIN_EFFECT:g}: not interpretable)", _random_span),
    Claim("necessity separates, steering does not", "necessity separates the settings, steering does not",
          "NCS: qsp - last 0.083 (p = 6e-10); CERS: every rank p >= 0.14", ("ncs_source_contrast", "table03_cers"),
          f"NCS(qsp) - NCS(last) >= {MIN_EFFECT:g} with paired p < {ALPHA:g} (pooled), and every CERS rank p >= "
          f"{STEER_P:g}", _separates),
    Claim("replicates on further models", "the referring + query-span effect replicates on several recent VLMs",
          "Qwen3-VL-4B, Qwen2-VL-7B", "table19_second_model", f"the referring + query-span set beats random on >= "
          f"{REPLICATE_MODELS} pretrained models other than the default (06's Table 19, audit passed); toys, sibling "
          "models of one curriculum, are reported per family and not counted", _replicates),
)  # fmt: skip


def claims(out_dir: Path, names: tuple[str, ...] | None = None) -> pd.DataFrame:
    """One row per claim (those in `names`, default all): the paper's words and number, this run's number
    and detail, and the verdict. Reads only the tables the chosen claims rest on."""
    chosen = _chosen(names)
    needed = {name for c in chosen for name in _names_of(c)}
    tables = {n: pd.read_csv(Path(out_dir) / f"{n}.csv") for n in needed if (Path(out_dir) / f"{n}.csv").exists()}
    missing = {c.name: f"{', '.join(_names_of(c))} not written in this run yet (its notebook has not run)"
               for c in chosen if not set(_names_of(c)) <= set(tables)}  # fmt: skip
    return claim_rows(tables, names, missing)


def _names_of(claim: Claim) -> tuple[str, ...]:
    return claim.table if isinstance(claim.table, tuple) else (claim.table,)


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
            value, detail, holds = claim.measure(*(tables[n] for n in _names_of(claim)))
        rows.append(
            {
                "claim": claim.name,
                "paper says": claim.paper_says,
                "paper": claim.paper() if callable(claim.paper) else claim.paper,
                "this run": value,
                "detail": detail,
                "rule": claim.rule,
                "holds": VERDICTS[holds],
                "table": ", ".join(_names_of(claim)),
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
    best = table.loc[table.S.round(3).idxmax()]  # the first of a tie at the printed precision
    return f"{printed(best.S)} ({best.setting}, p = {best.p:.3f} at R = {best.R})"


def _verdict_counts(table: pd.DataFrame) -> str:
    """The settings' outcomes in the paper's two readings (verdicts.two_readings): each set against its own random
    sets, and family-wise (Holm across the settings) with the smallest Holm p this R allows."""
    readings = two_readings(table)
    return (
        f"each against its own random sets: {_tally(readings.per_set)}; "
        f"family-wise ({readings.note()}): {_tally(readings.family)}"
    )


def _tally(calls: list) -> str:
    """How many calls had each outcome, and the reasons of those not interpretable."""
    counts = {o: sum(c.outcome == o for c in calls) for o in (BEATS, WITHIN, NOT_INTERPRETABLE)}
    reasons = "; ".join(dict.fromkeys(c.reason for c in calls if c.outcome == NOT_INTERPRETABLE))
    return (
        ", ".join(f"{n} {o}" for o, n in counts.items() if n)
        + f" of {len(calls)}"
        + (f" ({reasons})" if reasons else "")
    )


def _rs(table: pd.DataFrame) -> str:
    """The R of a table's rows: "R = 20", or "R = 20 / 250" where its rows differ."""
    return "R = " + " / ".join(str(r) for r in sorted(table["R"].unique()))


def headlines(out_dir: Path) -> pd.DataFrame:
    """The headline numbers of the run, each read from one of its tables."""
    out_dir = Path(out_dir)
    ncs3 = pd.read_csv(out_dir / "table03_ncs.csv")
    cers3 = pd.read_csv(out_dir / "table03_cers.csv")
    large = pd.read_csv(out_dir / "table10_large_r.csv")
    rows = [
        ("largest NCS (Table 3)", _largest(ncs3)),
        ("smallest NCS Holm p (Table 3)", f"{ncs3['p Holm'].min():.3f}"),
        (f"NCS settings against random at {_rs(ncs3)} (Table 3)", _verdict_counts(ncs3)),
        ("largest CERS (Table 3)", _largest(cers3)),
        (f"CERS settings against random at {_rs(cers3)} (Table 3)", _verdict_counts(cers3)),
        *(
            (f"{r.setting} against R = {r.R} (Table 10)",
             f"NCS {printed(r.S)}, random {printed(r['random mean'], 4)} ± {r['random sd']:.4f}, "
             f"z = {printed(r.z, 1)}{' (capped)' if r['z capped'] else ''}, p = {r.p:.4f}")
            for _, r in large.iterrows()
        ),
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=["quantity", "this run"])


CLAIMS_FLOAT_FORMAT = "%.4g"  # as 05 writes the claims table
GENERATED_BY = "Generated by notebook 05_controls"
REWRITTEN_BY = ", rewritten by helpers.run at the end of the run"


def write_results(out_dir: Path, table: pd.DataFrame, run: str, rewritten: bool = False) -> Path:
    """RESULTS.md in out_dir: the run, its headline numbers and the claims table; returns its path."""
    shown = table.drop(columns=["table"])
    by = GENERATED_BY + (REWRITTEN_BY if rewritten else "")
    text = "\n\n".join(
        [
            "# Results of this run",
            f"Run: {run}. {by} from the run's own tables (helpers/studies/claims.py).",
            "## Headline numbers",
            _markdown(headlines(out_dir)),
            "## The paper's claims on this run",
            _markdown(shown),
        ]
    )
    path = Path(out_dir) / "RESULTS.md"
    path.write_text(text + "\n")
    return path


def rewrite_after_run(out_dir: Path) -> Path | None:
    """claims.csv / .tex and RESULTS.md rewritten from the run folder's tables as they stand once every notebook of
    the run is done, so that a claim on a later notebook's table (06's Table 19) is tested in the same run.
    Returns RESULTS.md's path; None where 05 wrote neither."""
    results, claims_csv = Path(out_dir) / "RESULTS.md", Path(out_dir) / "claims.csv"
    if not (results.exists() and claims_csv.exists()):
        return None
    run = re.search(rf"^Run: (.*?)\. {GENERATED_BY}", results.read_text(), re.MULTILINE)
    if run is None:
        raise ValueError(f"{results}: no 'Run: ... {GENERATED_BY}' line; it was not written by write_results")
    table = claims(out_dir)
    save_table(table, "claims", out_dir, float_format=CLAIMS_FLOAT_FORMAT)
    return write_results(out_dir, table, run.group(1), rewritten=True)
