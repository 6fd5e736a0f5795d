"""Every path the companion reads or writes, in one place (showyourwork style)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HELPERS = ROOT / "helpers"
NOTEBOOKS = ROOT / "notebooks"
PAPER_FIGURES = ROOT / "paper_figures"  # committed outputs of the default `make figures` run
REFERENCE = PAPER_FIGURES / "reference"  # the paper's published numbers, as reference data
BUILD = ROOT / "build"  # executed notebooks, smoke-run outputs (git-ignored)
CACHE = ROOT / ".cache" / "results"  # per-item results keyed by parameter hash (git-ignored)
FINGERPRINTS = ROOT / ".cache" / "fingerprints.json"  # content hashes of model and corpus files (helpers.files)
TOY_MODEL = HELPERS / "toy" / "model"  # the embedded toy Qwen3-VL (save_pretrained folder)
BENCH_OUT = BUILD / "bench"
