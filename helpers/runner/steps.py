"""What each notebook reads and writes (showyourwork's step contracts).

``writes``: outputs in the run's ``out_dir`` (figures as .png + .pdf, tables as .csv + .tex, markdown as
.md, each figure also shown inline in the notebook). ``data_writes`` / ``data_reads``: files in the run's
``data_dir``, the channel between notebooks. ``out_reads``: tables of earlier notebooks in the run's
``out_dir`` (05's claims table reads 02-05's results). ``after``: notebooks that must finish first for a
reason the files do not show (02 reads 01's discovery runs from the result cache). The runner checks a
notebook's ``data_reads`` and ``out_reads`` before any notebook starts (they must exist, or be written by
an earlier notebook of the same run) and names the notebook to run first; with several jobs it starts a
notebook once the notebooks it waits for (``waits_for``) are done.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

from helpers.measures.names import CONTROL_SCHEMES, MASKING_VARIANTS
from helpers.sizes import SINGLE_HEAD_ITEMS, UNSEEDED_SEEDS, card_forward_copies, card_sizes
from helpers.stimuli.design import SETTINGS

SUFFIXES = {
    "figure": (".png", ".pdf"),
    "table": (".csv", ".tex"),
    "figure + table": (".png", ".pdf", ".csv", ".tex"),
    "markdown": (".md",),
}
HEADSETS = tuple(f"headsets/{s}.json" for s in SETTINGS)
HEADSETS_PER_LAYER = tuple(f"headsets/{s}_per_layer.json" for s in SETTINGS)
SCORES = "discovery_scores.csv"


@dataclass(frozen=True)
class Step:
    writes: dict[str, str]  # output name -> "figure", "table" or "figure + table"
    data_reads: tuple[str, ...] = ()
    data_writes: tuple[str, ...] = field(default=())
    out_reads: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    needs_regions: bool = False  # its analyses key on pixel regions: the model's adapter must map them to tokens
    # item x head-set copies the notebook asks for at parameters p, computed or read back from the cache
    forwards: Callable[[dict], int] = lambda p: 0

    def planned_forwards(self, params: dict) -> int:
        return self.forwards(params)

    @property
    def n_figures(self) -> int:
        return sum(kind.startswith("figure") for kind in self.writes.values())

    def output_files(self) -> list[str]:
        return [f"{name}{suffix}" for name, kind in self.writes.items() for suffix in SUFFIXES[kind]]


N_SETTINGS = len(SETTINGS)
MASKED_SETTINGS = ("cm-ref-qsp", "co-ref-qsp", "co-ord-last")  # notebook 05's masking table


def _discovery(p: dict) -> int:
    """Four corpus x query runs of n_strips strips, one read each (the greedy generation before it runs no probe and
    is not a copy)."""
    return 4 * p["n_strips"]


def _cers(p: dict) -> int:
    """12 settings x (S + R layer-matched sets + R any-layer sets, drawn per setting), steered to c and to d, and
    Table 18's sweep: 4 settings' S + R at the notebook's beta (Table 3's run, read back) and S + min(5, R) at each
    other beta."""
    r = p["n_random"]
    betas = len([b for b in p["betas"] if b != p["beta"]])
    sets = N_SETTINGS * (1 + 2 * r) + 4 * (1 + r) + 4 * betas * (1 + min(5, r))
    return p["n_items"] * 2 * sets


def _ncs(p: dict) -> int:
    """12 settings' S + R on both arms; Table 5's 4 settings' S + R at 3 row groups ("all" is the first run, read
    back) and its 4 per-layer sets' S + R masked on both arms and steered to c and to d; Tables 6 / 16's grid hides
    and steers of the 12 settings' S + R (the steers are 03's runs where its R is the same) and the all-heads
    hide."""
    per_setting = (1 + p["n_random"]) * p["n_items"] * 2
    return per_setting * (N_SETTINGS + 4 * 3 + 4 * 2 + N_SETTINGS * 2) + p["n_items"] * 2


def _methods(p: dict) -> int:
    """Per strip: the attention reads and generations of the seven methods (about 12 forwards) and the
    single-head ablation (one copy per 32 heads of the toy's forwards, `L * H / 32`); then the 9 methods' top-k
    sets with their R layer-matched sets and the R any-layer sets they share, masked on both NCS arms and
    steered to c and to d on `n_eval` items; each set's 6 generic-damage sets (its own first) masked on the two image
    arms and on the text arm."""
    sets = 9 * (1 + p["n_random"]) + p["n_random"]
    return p["n_items"] * (128 // 32 + 12) + p["n_eval"] * 2 * 2 * sets + p["n_eval"] * 3 * 6 * 9


def _controls(p: dict) -> int:
    """Per set, n_items copies on each of two arms (NCS) or steered to c and to d (CERS): Table 9 (S + R
    layer-matched and S + R attention-matched, steered and masked, per setting), 10 (the two ref-qsp sets' S + R
    large), 12 (6 damage sets on the two image arms and on the text arm), 13 (2 settings x 2 selections x 4 row
    groups), 14 (2 settings x the k values), 15 (6 pairs x 3 parts), 17 (Table 3's steers), the control schemes
    (each setting's S + R per scheme; the unseeded scheme's S + one set per seed) and the masking table (3 sets'
    S + R per masking). Runs shared with 03 / 04 count too: the runner's progress counts copies read back. An
    upper bound: bottom5's repeated pool runs its one distinct set once, and an empty part of Table 15 runs none."""
    r, n = p["n_random"], p["n_items"]
    per_set = 1 + r
    sets = N_SETTINGS * 4 * per_set + 2 * (1 + p["n_random_large"]) + 6
    sets += 2 * 2 * 4 * per_set + 2 * len(p["ks"]) * per_set + 6 * 3 * per_set + N_SETTINGS * per_set
    sets += N_SETTINGS * ((len(CONTROL_SCHEMES) - 1) * per_set + 1 + UNSEEDED_SEEDS)
    sets += len(MASKED_SETTINGS) * len(MASKING_VARIANTS) * per_set
    return n * 2 * sets + n * 6  # + Table 12's text arm: one arm per damage set


def _cross_model(p: dict) -> int:
    """Per model: the audit's four baselines, discovery (as 01), 4 sets' S + R and 4 sets' S + 1 masked on both
    arms, 8 sets' S + 1 steered to c and to d; the pointing suite's synthetic tasks; Table 16's 5 sets' S + R
    with a cell hidden and steered (an upper bound: only models that pass the audit run it); the single-head
    profile's L * H one-head sets masked on both arms (models whose config is not on disk yet count none); the
    sweeps: one set per k masked on both arms, one per beta steered twice."""
    per_model = 4 * p["n_items"] + _discovery(p) + (4 * (1 + p["n_random"]) + 4 * 2 + 8 * 2) * p["n_items"] * 2
    per_model += (len(p["ks"]) + len(p["betas"])) * p["n_items"] * 2
    suite = 5 * p["n_pointing"] * (5 + 10 * 2 * 2)  # 5 tasks: audit stimuli, 10 sets steered twice and masked twice
    table16 = 5 * (1 + p["n_random_grid"]) * p["n_items"] * 4  # passing models only; counted for every model here
    single = SINGLE_HEAD_ITEMS[p.get("profile", "default")] * 2 * sum(_heads(m) for m in p["models"])
    return len(p["models"]) * (per_model + suite + table16) + single


def _heads(model: str) -> int:
    """L * H candidate heads of `model` from its config (0 for a hub id not downloaded yet)."""
    from helpers.engine.adapters import adapter_from_files  # imports torch and transformers

    adapter = adapter_from_files(model)
    return 0 if adapter is None else len(adapter.candidate_layers) * adapter.n_heads


def _protocol(p: dict) -> int:
    """The report card of every head-set in `heads` at its profile's sizes (helpers/sizes.py CARD_SIZES)."""
    sizes = card_sizes(p["profile"], p["sizes"], p["smoke"])
    return sum(card_forward_copies(sizes, len(p["heads"]), p.get("controls")).values())


STEPS = {
    "00_design": Step(
        writes={
            "design_grid": "figure",
            "design_settings": "table",
            "design_model": "table",
            "example_stimuli": "figure",
            "table28_protocol": "table",
            "table29_conversion": "table",
        },
    ),
    "01_discovery": Step(
        needs_regions=True,
        writes={
            "discovery_accuracy": "table",
            "discovery_headsets": "table",
            "discovery_score_maps": "figure",
            "discovery_strip_overview": "figure",
        },
        data_writes=HEADSETS + HEADSETS_PER_LAYER + (SCORES,),
        forwards=_discovery,
    ),
    "02_overlap": Step(
        needs_regions=True,
        writes={
            "fig02_overlap_matrix": "figure + table",
            "table01_overlap_by_factor": "table",
            "table20_overlap_vs_ceiling": "table",
            "table21_crossover_overlap": "table",
            "fig06_topk_curve": "figure + table",
            "fig07_chance_overlap": "figure + table",
        },
        after=("01_discovery",),  # its discovery runs are 01's, read back from the result cache
        forwards=_discovery,
    ),
    "03_cers": Step(
        needs_regions=True,
        writes={
            "table03_cers": "table",
            "fig03_cers": "figure",
            "table18_cers_vs_beta": "figure + table",
        },
        data_reads=HEADSETS,
        forwards=_cers,
    ),
    "04_ncs": Step(
        needs_regions=True,
        writes={
            "table03_ncs": "table",
            "table11_ncs_arms": "table",
            "fig03_ncs": "figure",
            "ncs_source_contrast": "table",
            "table05_ncs_rows": "table",
            "table06_ncs_grid": "figure + table",
            "table16_region_contrast": "table",
            "fig01_causal_panel": "figure",
            "fig08_cers_vs_ncs": "figure",
        },
        data_reads=HEADSETS + HEADSETS_PER_LAYER,
        forwards=_ncs,
    ),
    "05_controls": Step(
        needs_regions=True,
        writes={
            "table09_rank_p": "table",
            "table10_large_r": "table",
            "table12_generic_damage": "figure + table",
            "table13_ncs_rows": "table",
            "table14_ncs_vs_k": "figure + table",
            "table15_shared_heads": "table",
            "table17_mass_cers": "figure + table",
            "claims": "table",
            "RESULTS": "markdown",
            "control_schemes": "figure + table",
            "control_schemes_summary": "markdown",
            "masking_implementations": "table",
        },
        data_reads=HEADSETS + HEADSETS_PER_LAYER + (SCORES,),
        out_reads=("table01_overlap_by_factor.csv", "table03_cers.csv", "table03_ncs.csv", "ncs_source_contrast.csv"),
        forwards=_controls,
    ),
    "06_cross_model": Step(
        after=("01_discovery",),  # its 40-strip discovery runs on `toy` are cut from 01's 400-strip chunks
        writes={
            "table22_baseline_audit": "table",
            "table19_second_model": "table",
            "table16_region_contrast_models": "table",
            "table08_further_models": "table",
            "table24_ood_models": "table",
            "fig07_cross_model_overlap": "figure + table",
            "table25_pointing_tasks": "table",
            "table22_pointing_audit": "table",
            "table26_pointing_tasks": "table",
            "table27_pointing_models": "table",
            "table23_ood_pooled": "table",
            "cross_model_resolution": "table",
            "cross_model_sweeps": "table",
            "claims_per_model": "table",
        },
        forwards=_cross_model,
    ),
    # reads its `heads` (head-set files, or setting names in data/headsets/); writes report.md, report.html
    # and card.json into the run's notebooks/ folder, beside the executed notebook
    "07_protocol": Step(
        after=("01_discovery",),  # its default heads are setting names, 01's head-sets
        writes={
            "protocol_verdicts": "table",
            "protocol_provenance": "table",
            "protocol_audit": "table",
            "protocol_necessity": "table",
            "protocol_steerability": "table",
            "protocol_sweep": "table",
            "protocol_random_sets_0": "figure",
            "protocol_damage": "table",
            "protocol_rows": "table",
            "INDEX": "markdown",  # the artefact index (helpers/runner/artefacts.py); the runner rewrites it last
        },
        forwards=_protocol,
    ),
    "08_methods": Step(
        # the 12 settings' scores come from 01's discovery runs in the result cache; its 20-item head masses are
        # cut from 07's 50-item chunks
        after=("01_discovery", "07_protocol"),
        needs_regions=True,
        writes={
            "methods_facts": "table",
            "methods_score_maps": "figure",
            "methods_overlap": "figure + table",
            "methods_ceilings": "table",
            "methods_ablation_agreement": "table",
            "methods_generic_damage": "table",
            "methods_validation": "table",
            "methods_validation_stats": "table",
        },
        forwards=_methods,
    ),
}


def producer(data_file: str) -> str | None:
    """The notebook that writes `data_file` into the data folder, or the output file into the run's folder."""
    return next(
        (name for name, step in STEPS.items() if data_file in step.data_writes or data_file in step.output_files()),
        None,
    )


def waits_for(names: list[str]) -> dict[str, set[str]]:
    """For each of the notebooks `names` (one run), those of `names` that must finish before it starts: the
    writers of what it reads, and its ``after``."""
    waits = {}
    for name in names:
        step = STEPS.get(name)
        if step is None:
            waits[name] = set()
            continue
        reads = step.data_reads + step.out_reads
        writers = {producer(f) for f in reads} | set(step.after)
        waits[name] = {other for other in names if other in writers and other != name}
    return waits
