"""What each notebook reads and writes (showyourwork's step contracts).

``writes``: outputs in the run's ``out_dir`` (figures as .png + .pdf, tables as .csv + .tex, each figure
also shown inline in the notebook). ``data_writes`` / ``data_reads``: files in the run's ``data_dir``,
the only channel between notebooks. The runner checks a notebook's ``data_reads`` before it starts
(they must exist, or be written by an earlier notebook of the same run) and names the notebook to run first.
"""

from dataclasses import dataclass, field

from helpers.design import SETTINGS

SUFFIXES = {"figure": (".png", ".pdf"), "table": (".csv", ".tex"), "figure + table": (".png", ".pdf", ".csv", ".tex")}
HEADSETS = tuple(f"headsets/{s}.json" for s in SETTINGS)
HEADSETS_PER_LAYER = tuple(f"headsets/{s}_per_layer.json" for s in SETTINGS)
SCORES = "discovery_scores.csv"


@dataclass(frozen=True)
class Step:
    writes: dict[str, str]  # output name -> "figure", "table" or "figure + table"
    data_reads: tuple[str, ...] = ()
    data_writes: tuple[str, ...] = field(default=())

    @property
    def n_figures(self) -> int:
        return sum(kind.startswith("figure") for kind in self.writes.values())

    def output_files(self) -> list[str]:
        return [f"{name}{suffix}" for name, kind in self.writes.items() for suffix in SUFFIXES[kind]]


STEPS = {
    "00_design": Step(
        writes={
            "design_grid": "figure",
            "design_settings": "table",
            "design_model": "table",
            "example_stimuli": "figure",
        },
    ),
    "01_discovery": Step(
        writes={
            "discovery_accuracy": "table",
            "discovery_headsets": "table",
            "discovery_score_maps": "figure",
            "discovery_strip_overview": "figure",
        },
        data_writes=HEADSETS + HEADSETS_PER_LAYER + (SCORES,),
    ),
    "02_overlap": Step(
        writes={
            "fig02_overlap_matrix": "figure + table",
            "table01_overlap_by_factor": "table",
            "table20_overlap_vs_ceiling": "table",
            "table21_crossover_overlap": "table",
            "fig06_topk_curve": "figure + table",
            "fig07_chance_overlap": "figure + table",
        },
    ),
    "03_cers": Step(
        writes={
            "table03_cers": "table",
            "fig03_cers": "figure",
            "table18_cers_vs_beta": "table",
            "fig18_cers_vs_beta": "figure",
        },
        data_reads=HEADSETS,
    ),
    "04_ncs": Step(
        writes={
            "table03_ncs": "table",
            "table11_ncs_arms": "table",
            "fig03_ncs": "figure",
            "ncs_source_contrast": "table",
            "table05_ncs_rows": "table",
            "table06_ncs_grid": "figure + table",
        },
        data_reads=HEADSETS,
    ),
    "05_controls": Step(
        writes={
            "table09_rank_p": "table",
            "table10_large_r": "table",
            "table12_generic_damage": "figure + table",
            "table13_ncs_rows": "table",
            "table14_ncs_vs_k": "figure + table",
            "table15_shared_heads": "table",
            "table17_mass_cers": "figure + table",
        },
        data_reads=HEADSETS + HEADSETS_PER_LAYER + (SCORES,),
    ),
    # reads its `heads` (head-set files, or setting names in data/headsets/); writes report.md, report.html
    # and card.json into the run's notebooks/ folder, beside the executed notebook
    "07_protocol": Step(
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
        },
    ),
}


def producer(data_file: str) -> str | None:
    """The notebook that writes `data_file` into the data folder."""
    return next((name for name, step in STEPS.items() if data_file in step.data_writes), None)
