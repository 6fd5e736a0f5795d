"""Every path the companion reads or writes, in one place (showyourwork style).

A *run* writes into one folder set (see helpers/storage/runs.py): tables and figures, the data its notebooks
pass to each other, and its executed notebooks. The default full run publishes: its outputs go to
PAPER_FIGURES, its data to DATA, its executed notebooks to PAPER_FIGURES / "notebooks". Every other run
gets a folder of its own under RUNS.
"""

import os
import sys
from pathlib import Path

DECIDES_RESULTS = False  # where and how results are kept, not what they are (helpers.storage.code_hash)
HELPERS = Path(__file__).resolve().parents[1]
# A checkout holds pyproject.toml beside helpers/ and writes into itself. An install (`pip install .`) has helpers/
# in site-packages, its notebooks and the paper's reference tables in SHIPPED (pyproject.toml's data-files), and
# writes into $VISUAL_HEADS_HOME, else the folder it runs in.
INSTALLED = not (HELPERS.parent / "pyproject.toml").is_file()
SHIPPED = Path(sys.prefix) / "share" / "visual-heads-companion"
ROOT = Path(os.environ.get("VISUAL_HEADS_HOME", Path.cwd())).resolve() if INSTALLED else HELPERS.parent
NOTEBOOKS = SHIPPED / "notebooks" if INSTALLED else ROOT / "notebooks"
PAPER_FIGURES = ROOT / "paper_figures"  # published outputs of the default full run (committed)
PUBLISHED_NOTEBOOKS = PAPER_FIGURES / "notebooks"  # its executed notebooks, .ipynb + .html (committed)
DATA = ROOT / "data"  # what the default run's notebooks pass to each other: head-sets, score maps (committed)
REFERENCE = SHIPPED / "reference" if INSTALLED else PAPER_FIGURES / "reference"  # the paper's published numbers
RUNS = ROOT / "runs"  # one folder per other run: another model, changed parameters, a subset (git-ignored)
BUILD = ROOT / "build"  # smoke runs, converted notebook sources, browser screenshots (git-ignored)
CACHE = ROOT / ".cache" / "results"  # per-item results keyed by parameters, model and code (git-ignored)
FINGERPRINTS = (
    ROOT / ".cache" / "fingerprints.json"
)  # content hashes of model and corpus files (helpers.storage.files)
TOY_MODEL = HELPERS / "toy" / "model"  # the embedded toy Qwen3-VL (save_pretrained folder)
TOY_MODELS = HELPERS / "toy" / "models"  # the further toys: "toy-<name>" is TOY_MODELS / <name>


def shown(path: Path | str) -> str:
    """A path as outputs print it: relative to the repository root when inside it (so executed notebooks and
    reports read the same on every checkout), else absolute."""
    path = Path(path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def toy_folder(name: str) -> Path | None:
    """The folder of a toy model name ("toy", "toy-qwen2vl", ...); None for any other name or path."""
    if name == "toy":
        return TOY_MODEL
    if name.startswith("toy-") and "/" not in name:
        return TOY_MODELS / name.removeprefix("toy-")
    return None


BENCH_OUT = BUILD / "bench"
