"""Every reference to the project's code in its text resolves: dotted names (`helpers.storage.headsets.save`) import
and have the attribute named, paths (`helpers/sizes.py`, `helpers/sizes.RANDOM_SETS`) exist, in the
docstrings, comments and error messages of helpers/, bench/ and the notebooks, the head-set schema and the Markdown
files. So do the names and paths written from inside the package (`measures.overlap.top_k`, `storage/cache.py`) and
every Markdown file named. A module moved or renamed leaves no stale pointer behind, and no test reads a file at an
absolute path of the machine it was written on."""

import importlib
import io
import re
import tokenize
from pathlib import Path

from helpers.storage import paths

DOTTED = re.compile(r"\bhelpers(?:\.[A-Za-z_]\w*)+")
SLASHED = re.compile(r"\bhelpers(?:/[\w.-]+)+")
TEXT_FILES = ("*.py", "*.md", "*.json")
FOLDERS = ("helpers", "bench", "notebooks")
PACKAGES = sorted(p.name for p in paths.HELPERS.iterdir() if (p / "__init__.py").is_file()) + ["sizes"]
# In prose (comments, strings, Markdown): a name or path that starts at one of helpers' packages, and a path to a
# Markdown file
RELATIVE = re.compile(r"(?<![\w./-])(?:" + "|".join(PACKAGES) + r")(?:\.[A-Za-z_]\w*)+")
RELATIVE_PATH = re.compile(r"(?<![\w./-])(?:" + "|".join(PACKAGES) + r")(?:/[\w.-]+)+")
MARKDOWN = re.compile(r"(?<![\w./-])[A-Za-z_][\w.-]*(?:/[\w.-]+)+\.md\b")
MACHINE_PATH = re.compile(r"""["'](?:/work|/home|/root|/Users|/mnt|/data)/""")


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
    """A file or folder, or a module file followed by one of its names (helpers/sizes.RANDOM_SETS)."""
    if (paths.ROOT / slashed).exists():
        return True
    module, _, name = slashed.rpartition(".")
    return (paths.ROOT / f"{module}.py").is_file() and _resolves(f"{module.replace('/', '.')}.{name}")


def _prose(path: Path) -> str:
    """The comments and strings of a Python file (an f-string without its replacement fields), else the text."""
    text = path.read_text(errors="ignore")
    if path.suffix != ".py":
        return text
    parts = []
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            parts.append(token.string)
        elif token.type == tokenize.STRING:
            string, prefix = token.string, token.string[:2].lower().strip("r")
            parts.append(re.sub(r"\{[^{}]*\}", "", string) if prefix.startswith("f") else string)
    return "\n".join(parts)


def _file_named(path: Path, named: str) -> bool:
    """`named` exists from the checkout's root, from helpers/, or from the folder of the file naming it."""
    return any((folder / named).exists() for folder in (paths.ROOT, paths.HELPERS, path.parent))


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


def test_every_name_and_path_written_from_inside_the_package_resolves():
    stale = []
    for path in _texts():
        prose = _prose(path)
        for match in RELATIVE.finditer(prose):
            ref = match.group(0).rstrip(".")
            if not ref.endswith((".py", ".json", ".md")) and not _resolves(f"helpers.{ref}"):
                stale.append(f"{path.relative_to(paths.ROOT)}: {ref}")
        for match in RELATIVE_PATH.finditer(prose):
            ref = match.group(0).rstrip(".,")
            if not _path_resolves(f"helpers/{ref}") and not _file_named(path, ref):
                stale.append(f"{path.relative_to(paths.ROOT)}: {ref}")
        for match in MARKDOWN.finditer(prose):
            if not _file_named(path, match.group(0)):
                stale.append(f"{path.relative_to(paths.ROOT)}: {match.group(0)}")
    assert not stale, f"{len(stale)} stale reference(s):\n" + "\n".join(sorted(set(stale)))


def test_no_test_reads_an_absolute_path_of_a_machine():
    tests = sorted(Path(__file__).parent.glob("*.py"))
    found = [f"{p.name}: {m.group(0)}" for p in tests for m in MACHINE_PATH.finditer(_prose(p)) if p != Path(__file__)]
    assert not found, found
