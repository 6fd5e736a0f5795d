"""The paper's 2 x 3 x 2 discovery design: names of corpora, queries, attention sources and settings."""

from dataclasses import dataclass
from itertools import product

CORPORA = {"cm": "comics-like strips (flat cartoon panels)", "co": "COCO-like strips (photo-like panels)"}
QUERIES = {"ord": "ordinal: the panel is named by its position", "ref": "referring: the panel is named by its content"}
SOURCES = {
    "last": "the last prompt token",
    "qsp": "the query-span tokens that pick the panel",
    "out": "the generated answer tokens (teacher-forced greedy answer)",
}
SETTINGS = tuple(f"{c}-{q}-{s}" for c, q, s in product(CORPORA, QUERIES, SOURCES))  # 12 names

# The paper's head-set size: flat top-100 of Qwen3-VL-8B's 36 layers x 32 heads.
PAPER_K, PAPER_N_HEADS = 100, 36 * 32
PAPER_K_SHARE = PAPER_K / PAPER_N_HEADS  # ~0.087


# What each notebook writes into out_dir (default paper_figures/): figures as .png + .pdf, tables as
# .csv + .tex. The smoke test checks that every name listed here is written.
OUTPUTS = {
    "00_design": {
        "design_grid": "figure",
        "design_settings": "table",
        "design_model": "table",
        "example_stimuli": "figure",
    },
    "01_discovery": {
        "discovery_accuracy": "table",
        "discovery_headsets": "table",
        "discovery_score_maps": "figure",
        "discovery_strip_overview": "figure",
        "discovery_scores.csv": "file",
        "headsets/": "folder of 24 head-set files",
    },
    "02_overlap": {
        "fig02_overlap_matrix": "figure + table",
        "table01_overlap_by_factor": "table",
        "table20_overlap_vs_ceiling": "table",
        "table21_crossover_overlap": "table",
        "fig06_topk_curve_ref_qsp": "figure + table",
        "fig07_chance_overlap": "figure + table",
    },
    "03_cers": {
        "table03_cers": "table",
        "fig03_cers": "figure",
        "table18_cers_vs_beta": "table",
        "fig18_cers_vs_beta": "figure",
    },
    "04_ncs": {
        "table03_ncs": "table",
        "table11_ncs_arms": "table",
        "fig03_ncs": "figure",
        "ncs_source_contrast": "table",
        "table05_ncs_rows": "table",
        "table06_ncs_grid": "table",
        "fig06_ncs_grid": "figure",
    },
    "05_controls": {
        "table09_rank_p": "table",
        "table10_large_r": "table",
        "table12_generic_damage": "table",
        "fig12_generic_damage": "figure",
        "table13_ncs_rows": "table",
        "table14_ncs_vs_k": "table",
        "fig14_ncs_vs_k": "figure",
        "table15_shared_heads": "table",
        "table17_mass_cers": "table",
        "fig17_mass_vs_cers": "figure",
    },
}
OUTPUT_SUFFIXES = {
    "figure": (".png", ".pdf"),
    "table": (".csv", ".tex"),
    "figure + table": (".png", ".pdf", ".csv", ".tex"),
}


@dataclass(frozen=True)
class Setting:
    corpus: str
    query: str
    source: str

    @property
    def name(self) -> str:
        return f"{self.corpus}-{self.query}-{self.source}"


def parse_setting(name: str) -> Setting:
    """'cm-ref-qsp' -> Setting('cm', 'ref', 'qsp'); unknown names raise with the allowed list."""
    if name not in SETTINGS:
        raise ValueError(f"unknown setting {name!r}; allowed: {', '.join(SETTINGS)}")
    return Setting(*name.split("-"))


def k_for(n_heads: int, k: float | int | None = None) -> int:
    """Head-set size: an absolute k (int), a share of all heads (0 < float < 1), or the paper's share."""
    share = PAPER_K_SHARE if k is None else k
    if isinstance(share, float) and 0 < share < 1:
        return max(1, round(share * n_heads))
    if isinstance(share, int) and not isinstance(share, bool) and 0 < share <= n_heads:
        return share
    raise ValueError(f"k={k!r} is not allowed: use an int in 1..{n_heads} or a share 0 < k < 1")
