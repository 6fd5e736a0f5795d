"""Run folders: where one run of the notebooks writes its tables, figures, data and executed notebooks.

Only the default configuration (the embedded toy, every parameter at its notebook default, the full
run) publishes into ``paper_figures/`` and ``data/``. Any other run (another model, a changed
parameter, a subset of notebooks) writes into ``runs/<model>-<hash of the changed parameters>/``, so a
quick exploratory run never touches the published results nor the inputs of later published notebooks.
"""

import hashlib
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path

from helpers.storage import paths

DIR_PARAMETERS = ("out_dir", "data_dir", "cache_dir")


@dataclass(frozen=True)
class RunFolders:
    out: Path  # tables (.csv + .tex) and figures (.png + .pdf)
    data: Path  # files the notebooks pass to each other (head-sets, score tables)
    notebooks: Path  # executed notebooks (.ipynb + .html)

    @property
    def run_json(self) -> Path:
        return self.notebooks / "run.json"


PUBLISHED = RunFolders(out=paths.PAPER_FIGURES, data=paths.DATA, notebooks=paths.PUBLISHED_NOTEBOOKS)


def in_folder(root: Path) -> RunFolders:
    """The layout of one run folder: outputs at the top, data/ and notebooks/ inside."""
    root = Path(root)
    return RunFolders(out=root, data=root / "data", notebooks=root / "notebooks")


def run_name(model: str, changed: dict) -> str:
    """'toy-default' or '<model slug>-<8 hex of the changed parameters>' (the model's name is part of the slug)."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", Path(model).name if Path(model).is_dir() else model).strip("-").lower()
    rest = {k: v for k, v in changed.items() if k != "model" and k not in DIR_PARAMETERS}
    if not rest:
        return f"{slug}-default"
    text = json.dumps(rest, sort_keys=True, default=str)
    return f"{slug}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def scratch(model: str, changed: dict) -> RunFolders:
    """The run folder of a run that does not publish."""
    return in_folder(paths.RUNS / run_name(model, changed))


def is_default(model: str, changed: dict) -> bool:
    """The default configuration: the embedded toy with every result-changing parameter at its default."""
    return model == "toy" and not [k for k in changed if k not in DIR_PARAMETERS and k != "model"]


def folders_for(model: str, changed: dict, publish: bool = False) -> RunFolders:
    """The folders of a run. `publish` (the default full run): PUBLISHED. Otherwise the run's own folder;
    the default configuration still reads and writes the published data (the same files it would make)."""
    if publish:
        return PUBLISHED
    folders = scratch(model, changed)
    return replace(folders, data=paths.DATA) if is_default(model, changed) else folders
