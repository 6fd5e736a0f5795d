"""The paper's figures and tables, and the files of a run folder that regenerate each: the artefact index.

Every figure and table the paper's text names (Figures 1-3 and 5-8, Tables 1-6 and 8-29; Figure 4 and
Table 7 are not named in it) is one `Artefact`: its id, the gist of its caption, the outputs that
regenerate it (names declared in helpers/runner/steps.py, each with its suffixes there) and a status:

- "full": every part of it is made by the default run (on the model in use, at the run's sizes);
- "partial": some of it is, `note` says what is missing;
- "not regenerated": none of it is, `note` says why.

`write_index(out_dir)` writes INDEX.md into a run folder: one row per artefact, with the files a listed
output lacks in that folder named in its row, and the counts. Notebook 07 (the last in order) writes it,
and the runner writes it again once every notebook of the run is done (notebooks run side by side).
"""

from dataclasses import dataclass
from pathlib import Path

from helpers.runner.steps import STEPS, SUFFIXES
from helpers.storage import paths

FULL, PARTIAL, NOT = "full", "partial", "not regenerated"
STATUSES = (FULL, PARTIAL, NOT)
INDEX = "INDEX.md"


@dataclass(frozen=True)
class Artefact:
    id: str  # "Figure 2", "Table 3"
    gist: str
    outputs: tuple[str, ...]  # output names of helpers/runner/steps.py
    status: str
    note: str = ""  # partial: what is missing; not regenerated: why; full: anything to know

    @property
    def notebooks(self) -> list[str]:
        return sorted({notebook_of(name) for name in self.outputs})

    @property
    def files(self) -> list[str]:
        return [f for name in self.outputs for f in files_of(name)]


def notebook_of(output: str) -> str:
    """The notebook that declares `output` in helpers/runner/steps.py."""
    hits = [notebook for notebook, step in STEPS.items() if output in step.writes]
    if len(hits) != 1:
        raise KeyError(f"output {output!r} is declared by {len(hits)} notebooks in helpers/runner/steps.py")
    return hits[0]


def files_of(output: str) -> list[str]:
    """The files `output` is written as (its kind's suffixes in helpers/runner/steps.py)."""
    return [f"{output}{suffix}" for suffix in SUFFIXES[STEPS[notebook_of(output)].writes[output]]]


OOD = "the paper's out-of-domain benchmarks join only through 06's `benchmarks` files (none by default)"
PER_LAYER = (
    "its per-layer sets are notebook 01's top-ceil(k / L) per layer, the fewest per layer that hold at least the flat "
    "k, as the paper's top-3 of 36 layers (108 heads) holds more than its flat top-100"
)
ELEVEN_OF_14 = "the paper's 14 tasks include MathVista and CV-Bench ones with no counterpart here: at most 11 of 14"

ARTEFACTS = (
    Artefact(
        "Figure 1",
        "Overview: the 2 x 3 x 2 discovery design, one strip's attention per source, and the two causal tests",
        ("design_grid", "discovery_strip_overview", "example_stimuli", "fig01_causal_panel"),
        FULL,
        "the causal panel on the first synthetic COCO-like grid (co-ref-qsp's S and its first random set)",
    ),
    Artefact("Figure 2", "Top-100 head overlap between all 12 discovery settings", ("fig02_overlap_matrix",), FULL),
    Artefact(
        "Figure 3",
        "Table 3 at a glance: each discovered set against its layer-matched random band (CERS, NCS)",
        ("fig03_cers", "fig03_ncs"),
        FULL,
    ),
    Artefact(
        "Figure 5",
        "(no caption in the seed text) NCS against the head-set size k, as Table 28 groups it with Table 14",
        ("table14_ncs_vs_k",),
        PARTIAL,
        "the paper's caption and panels are not in the seed text: table14_ncs_vs_k's figure (NCS vs. k) stands in",
    ),
    Artefact(
        "Figure 6",
        "Top-k overlap between cm-ref-qsp and co-ref-qsp as k grows (shared / unique heads, fraction)",
        ("fig06_topk_curve",),
        FULL,
    ),
    Artefact(
        "Figure 7",
        "Native ord-last / ref-qspan / ref-out sets' overlap with each other and with a uniform random draw",
        ("fig07_chance_overlap", "fig07_cross_model_overlap"),
        FULL,
        "on the model in use (02) and on each of 06's `models` (toys by default; the paper: eight further models)",
    ),
    Artefact(
        "Figure 8",
        "CERS vs. NCS on example images: the steered 2x2 grid and the matched / mismatched NCS images",
        ("fig08_cers_vs_ncs",),
        FULL,
        "on synthetic images: co-ref-qsp's S steered on one grid, and one matched / mismatched image masked",
    ),
    Artefact(
        "Table 1",
        "Median top-100 overlap when one factor (source, query, corpus) changes",
        ("table01_overlap_by_factor",),
        FULL,
    ),
    Artefact(
        "Table 2",
        "Top-20 overlap of a crossover query + source combination with the native head-sets",
        ("table21_crossover_overlap",),
        PARTIAL,
        "the seed text has no Table 2: its combination is a row of table21_crossover_overlap, with no paper values",
    ),
    Artefact(
        "Table 3",
        "CERS and NCS of all 12 settings against layer-matched (and any-layer) random sets, rank p",
        ("table03_cers", "table03_ncs"),
        FULL,
        "paper values: CERS for the 4 rows in the seed text; NCS for 10 of 12 rows (Tables 3, 5, 10, 11, 14, 19)",
    ),
    Artefact(
        "Table 4",
        "(no caption in the seed text) a result on flat top-k sets, k = 20..160 (Table 28)",
        (),
        NOT,
        "the seed text has neither its caption nor its numbers; the top-k NCS runs Table 28 ties to it are Table 14's",
    ),
    Artefact(
        "Table 5",
        "Where and with which heads necessity acts: rows masked, flat top-100 vs. top-3 per layer (COCO)",
        ("table05_ncs_rows", "table13_ncs_rows"),
        FULL,
        "both halves in table05_ncs_rows (per layer: NCS, CERS / random mean, p; the paper's values of both halves "
        "beside them); the per-layer sets' row groups in table13_ncs_rows; "
        f"{PER_LAYER}",
    ),
    Artefact(
        "Table 6",
        "Necessity as a region contrast on the leak-audited grid, rank p against layer-matched sets",
        ("table06_ncs_grid",),
        FULL,
        "the NCS_grid columns of 04's one region-contrast run (Table 16's), with the grid audit and the largest "
        "attainable NCS_grid (the cell hidden from every head)",
    ),
    Artefact(
        "Table 8",
        "Further models: NCS and CERS ranges of the query-span / output sets vs. their random draws",
        ("table08_further_models",),
        PARTIAL,
        f"scored on the evaluation grid / MCQ of each of 06's `models`; {OOD}",
    ),
    Artefact(
        "Table 9",
        "Rank p against layer-matched (A) and layer- and attention-matched (B) random sets",
        ("table09_rank_p",),
        FULL,
    ),
    Artefact("Table 10", "The referring + query-span sets against R = 250 random sets", ("table10_large_r",), FULL),
    Artefact(
        "Table 11", "NCS split into its matched and mismatched arms, all 12 settings", ("table11_ncs_arms",), FULL
    ),
    Artefact(
        "Table 12",
        "Generic-damage controls on co-ref-qsp (sinks, text-heavy heads, whole layers, larger random sets)",
        ("table12_generic_damage",),
        FULL,
    ),
    Artefact(
        "Table 13",
        "NCS with the image mask at one group of attention rows (COCO settings)",
        ("table13_ncs_rows",),
        FULL,
        PER_LAYER,
    ),
    Artefact(
        "Table 14",
        "NCS against the head-set size k (cm-ref-qsp, co-ref-qsp)",
        ("table14_ncs_vs_k",),
        FULL,
        "k = 20, 40, 60, 100, 140 as the paper's table, and 160 (Table 28's range); no paper values at 160",
    ),
    Artefact(
        "Table 15",
        "NCS of shared vs. setting-specific heads above same-size random controls",
        ("table15_shared_heads",),
        FULL,
        "p is the paper's paired one-sided test over items (its caption); the rank p among the same sets beside it",
    ),
    Artefact(
        "Table 16",
        "Region-contrast NCS and symmetric CERS on the leak-audited grid, with R",
        ("table16_region_contrast", "table16_region_contrast_models"),
        FULL,
        "04's run of Table 6 with its symmetric CERS (the same sets, grid and R); the same computation per model "
        "of 06's `models` that passes the baseline audit",
    ),
    Artefact(
        "Table 17", "Image-attention mass of the head-sets and its relation to CERS", ("table17_mass_cers",), FULL
    ),
    Artefact("Table 18", "CERS against the steering strength beta", ("table18_cers_vs_beta",), FULL),
    Artefact(
        "Table 19",
        "Second-model check: NCS of the four COCO sets vs. 20 layer-matched controls, per model",
        ("table19_second_model",),
        FULL,
        "on each of 06's `models` (toys by default)",
    ),
    Artefact(
        "Table 20",
        "Top-100 overlap at half the data against the half-split noise ceiling",
        ("table20_overlap_vs_ceiling",),
        FULL,
    ),
    Artefact(
        "Table 21",
        "Top-20 overlap of the crossover combinations with the native head-sets",
        ("table21_crossover_overlap",),
        FULL,
        "every combination from half the COCO-like strips (the paper: 200) against the native sets from all strips",
    ),
    Artefact(
        "Table 22",
        "Baseline audit: oracle, blank floor, NCS arms without intervention",
        ("table22_baseline_audit", "table22_pointing_audit"),
        PARTIAL,
        f"per model (evaluation grid) and per pointing task; {OOD}",
    ),
    Artefact(
        "Table 23",
        "CERS and NCS pooled over the out-of-domain tasks, three query-span sets and their draws",
        ("table23_ood_pooled",),
        PARTIAL,
        f"pooled over the synthetic pointing tasks that pass the audit; {OOD}",
    ),
    Artefact(
        "Table 24",
        "Out-of-domain CERS / NCS of five discovered sets with their draws, further models",
        ("table24_ood_models",),
        PARTIAL,
        f"scored on the evaluation grid / MCQ of each of 06's `models`; {OOD}",
    ),
    Artefact(
        "Table 25",
        "The tasks of the pointing suite",
        ("table25_pointing_tasks",),
        PARTIAL,
        "the synthetic tasks of the registry; the six converted tasks are listed only when `benchmarks` gives files; "
        + ELEVEN_OF_14,
    ),
    Artefact(
        "Table 26",
        "CERS of the ord-last set and one random draw per pointing task",
        ("table26_pointing_tasks",),
        PARTIAL,
        f"the synthetic tasks only by default (the converted ones need `benchmarks` files); {ELEVEN_OF_14}",
    ),
    Artefact(
        "Table 27",
        "Pointing-suite CERS per model, pooled over the tasks",
        ("table27_pointing_models",),
        PARTIAL,
        f"pooled over the synthetic tasks only by default (the paper: all 14 tasks); {ELEVEN_OF_14}",
    ),
    Artefact(
        "Table 28",
        "Protocol per result: head-set, evaluation data, N and R",
        ("table28_protocol",),
        PARTIAL,
        "from helpers/sizes.py and the notebooks' parameters, under both profiles; its 'paper' N and R are "
        "this project's paper profile, which differs from the paper's own Table 28 in one row "
        "(Tables 2, 21; Fig. 7: N 400, the paper: 200)",
    ),
    Artefact(
        "Table 29",
        "Source and conversion recipe of the converted benchmarks",
        ("table29_conversion",),
        FULL,
        "from the converters' registry (helpers/stimuli/pointing_convert.py); the text lists six benchmarks",
    ),
)


def by_id() -> dict[str, Artefact]:
    return {a.id: a for a in ARTEFACTS}


def rows(out_dir: Path) -> list[dict]:
    """One row per artefact: its status, and the files among its listed ones that `out_dir` lacks."""
    out_dir = Path(out_dir)
    found = []
    for a in ARTEFACTS:
        missing = [f for f in a.files if not (out_dir / f).is_file()]
        found.append({"artefact": a, "missing": missing})
    return found


def status_counts(found: list[dict]) -> dict[str, int]:
    """Artefacts per status, and how many list a file the run folder lacks."""
    tally = {s: sum(r["artefact"].status == s for r in found) for s in STATUSES}
    tally["with files missing"] = sum(bool(r["missing"]) for r in found)
    return tally


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def index_markdown(out_dir: Path) -> tuple[str, dict[str, int]]:
    found = rows(out_dir)
    tally = status_counts(found)
    lines = [
        "# Artefact index: the paper's figures and tables in this run folder",
        "",
        f"{len(found)} artefacts: {tally[FULL]} full, {tally[PARTIAL]} partial, {tally[NOT]} not regenerated; "
        f"{tally['with files missing']} with files missing from this folder. "
        "Made by helpers/runner/artefacts.py (the registry); a status says what the notebooks build, "
        "a row naming missing files says this run did not write them.",
        "",
        "| Paper | Gist | Files | Notebook | Status |",
        "|---|---|---|---|---|",
    ]
    for r in found:
        a = r["artefact"]
        status = a.status + (f" ({a.note})" if a.note else "")
        if r["missing"]:
            status += f"; **missing from this run: {', '.join(r['missing'])}**"
        files = ", ".join(f"`{f}`" for f in a.files) or "-"
        lines.append(f"| {a.id} | {_cell(a.gist)} | {files} | {', '.join(a.notebooks) or '-'} | {_cell(status)} |")
    return "\n".join(lines) + "\n", tally


def write_index(out_dir: Path, echo: bool = True) -> dict[str, int]:
    """Write INDEX.md into `out_dir` (atomically); print and return the counts."""
    out_dir = Path(out_dir)
    text, tally = index_markdown(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / f".{INDEX}.tmp"
    tmp.write_text(text)
    tmp.replace(out_dir / INDEX)
    if echo:
        print(
            f"{paths.shown(out_dir / INDEX)}: {len(ARTEFACTS)} artefacts, {tally[FULL]} full, "
            f"{tally[PARTIAL]} partial, {tally[NOT]} not regenerated; "
            f"{tally['with files missing']} with files missing from this run"
        )
    return tally
