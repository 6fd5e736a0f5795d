"""Every reference to the project's code in its text resolves: dotted names (`helpers.storage.headsets.save`) import
and have the attribute named, paths (`helpers/sizes.py`, `helpers/sizes.STREAMS`) exist, in the
docstrings, comments and error messages of helpers/, bench/ and the notebooks, the head-set schema and the Markdown
files. A module moved or renamed leaves no stale pointer behind."""

import importlib
import re
from pathlib import Path

from helpers.storage import paths

DOTTED = re.compile(r"\bhelpers(?:\.[A-Za-z_]\w*)+")
SLASHED = re.compile(r"\bhelpers(?:/[\w.-]+)+")
TEXT_FILES = ("*.py", "*.md", "*.json")
FOLDERS = ("helpers", "bench", "notebooks")


def _texts() -> list[Path]:
    files = [paths.ROOT / "README.md"]
    for folder in FOLDERS:
        files += [p for pattern in TEXT_FILES for p in (paths.ROOT / folder).rglob(pattern) if p.is_file()]
    return sorted(p for p in files if ".ipynb_checkpoints" not in p.parts)


def _resolves(dotted: str) -> bool:
    """The longest importable prefix of `dotted`, then each later part an attribute of the one before."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


def _path_resolves(slashed: str) -> bool:
    """A file or folder, or a module file followed by one of its names (helpers/sizes.STREAMS)."""
    if (paths.ROOT / slashed).exists():
        return True
    module, _, name = slashed.rpartition(".")
    return (paths.ROOT / f"{module}.py").is_file() and _resolves(f"{module.replace('/', '.')}.{name}")


def test_every_reference_to_the_code_resolves():
    stale = []
    for path in _texts():
        text = path.read_text(errors="ignore")
        for match in DOTTED.finditer(text):
            ref = match.group(0).rstrip(".")
            if not ref.endswith((".py", ".json", ".md")) and not _resolves(ref):
                stale.append(f"{path.relative_to(paths.ROOT)}: {ref}")
        for match in SLASHED.finditer(text):
            ref = match.group(0).rstrip(".,")
            if not _path_resolves(ref):
                stale.append(f"{path.relative_to(paths.ROOT)}: {ref}")
    assert not stale, f"{len(stale)} stale reference(s):\n" + "\n".join(sorted(set(stale)))
