"""The version of the code behind a cached result: `code_version`, a hash of a module's code and of every
project module it imports, so a result is recomputed when any code it ran changed.

A module counts by its code alone: not its name, its place or its import lines, so moving or renaming a
module keeps every cached result (a name imported from a project module counts by that module's code, not
its name). Docstrings and comments do not count either. Modules are found by parsing, from the project's
root folder (the one holding ROOT_MARKER; for this project the folder holding helpers/, which in an installed
copy is site-packages: there only helpers' own modules count); relative imports are followed like absolute ones. A
module that sets `DECIDES_RESULTS = False` (the cache, its workers, file writing, the path table) decides where and how
results are kept, not what they are, and is left out.
"""

import ast
import functools
import hashlib
from pathlib import Path
from typing import NamedTuple

DECIDES_RESULTS = False  # how results are keyed, not what they are
ROOT_MARKER = "pyproject.toml"  # the file in the project's root folder


def project_root(start: Path) -> Path:
    """The nearest folder at or above `start` that holds ROOT_MARKER: where the project's modules are found."""
    for folder in (start, *start.parents):
        if (folder / ROOT_MARKER).is_file():
            return folder
    raise FileNotFoundError(f"no {ROOT_MARKER} in {start} or above it: the project's modules cannot be found")


@functools.cache
def _this_project() -> Path:
    """The folder holding helpers/: a checkout's root, or site-packages in an installed copy."""
    return Path(__file__).resolve().parents[2]


def code_version(module_name: str, root: Path | None = None) -> str:
    """Short hash of the code (_module_hash) of project module `module_name` and of every project module it
    imports, transitively, except those that set DECIDES_RESULTS = False; the hashes are sorted, so no name
    or order counts. `root`: the project's root folder (default: this project's). A name that is no project
    module raises (its version would be the hash of nothing, the same whatever the code)."""
    root = root or _this_project()
    if _module_path(module_name, root) is None:
        raise ValueError(f"code_version: {module_name!r} is not a module of the project in {root}")
    known = _VERSIONS.get((module_name, root))
    if known is not None and _file_states(known[1]) == known[1]:  # no file it was made from changed
        return known[0]
    modules = _project_imports(module_name, root)
    hashes = [_module_hash(name, root) for name in modules if _decides_results(name, root)]
    version = hashlib.sha256("\n".join(sorted(h for h in hashes if h)).encode()).hexdigest()[:12]
    _VERSIONS[(module_name, root)] = (version, _file_states(tuple((_module_path(n, root), "") for n in modules)))
    return version


# (module, root) -> (its version, the (path, sha256 of the bytes) of every file it was made from): a cache key
# is made per cached call; reading the files again is cheap, parsing the import graph cost ~0.1 s per key
_VERSIONS: dict[tuple[str, Path], tuple[str, tuple]] = {}


def _file_states(states: tuple) -> tuple:
    """The current (path, sha256 of its bytes; "" once it is gone) of each path of `states` ((path, anything))."""
    return tuple(
        (path, hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "") for path, _ in sorted(states)
    )


def _module_path(name: str, root: Path) -> Path | None:
    """The file of project module `name` (a package's __init__.py), or None when `name` is not one. Beside no
    ROOT_MARKER (an installed copy in site-packages) only the modules of this package are the project's."""
    if not (root / ROOT_MARKER).is_file() and name.split(".")[0] != __name__.split(".")[0]:
        return None
    base = root.joinpath(*name.split("."))
    path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
    return path if path.is_file() else None


def _project_imports(module_name: str, root: Path | None = None) -> frozenset[str]:
    """`module_name` and the project modules it imports, transitively (a package's __init__ included)."""
    root = root or _this_project()
    seen, todo = set(), [module_name]
    while todo:
        parts = todo.pop().split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__ too
            prefix = ".".join(parts[:i])
            if prefix not in seen and _module_path(prefix, root):
                seen.add(prefix)
                todo += [module for module, _, _ in _imports(prefix, root) if _module_path(module, root)]
    return frozenset(seen)


def _imports(name: str, root: Path) -> list[tuple[str, str, str]]:
    """(module, imported name, bound name) of each import of project module `name`, relative ones made absolute;
    `from package import module` names the module itself, with no imported name."""
    path = _module_path(name, root)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = []
    for level, module, imported, bound in _parsed(path.read_text()).imports:
        if level:  # from . import x, from ..y import z
            module = ".".join(package[: len(package) - level + 1] + ([module] if module else []))
        if imported and _module_path(f"{module}.{imported}", root):
            module, imported = f"{module}.{imported}", ""
        found.append((module, imported, bound))
    return found


def _decides_results(name: str, root: Path) -> bool:
    return _parsed(_module_path(name, root).read_text()).decides_results


def _own_hash(name: str, root: Path) -> str:
    """Hash of module `name`'s code and of what it imports from outside the project."""
    code = _parsed(_module_path(name, root).read_text()).code
    outside = sorted(f"{m}:{i}:{b}" for m, i, b in _imports(name, root) if not _module_path(m, root))
    return hashlib.sha256("\n".join([code, *outside]).encode()).hexdigest()


def _module_hash(name: str, root: Path) -> str:
    """_own_hash of module `name` and, for each name it imports from a project module that decides results, the
    name as bound and the _own_hash of the module it comes from (which module, by its code and not its name);
    "" for a module with neither code nor imports (an empty package __init__)."""
    imports = _imports(name, root)
    if not imports and _parsed(_module_path(name, root).read_text()).empty:
        return ""
    inside = sorted(
        f"{i}:{b}:{_own_hash(m, root)}" for m, i, b in imports if _module_path(m, root) and _decides_results(m, root)
    )
    return hashlib.sha256("\n".join([_own_hash(name, root), *inside]).encode()).hexdigest()


class _Parsed(NamedTuple):
    code: str  # the syntax tree without docstrings and import statements, as text
    imports: tuple[tuple[int, str, str, str], ...]  # (level, module, imported name, bound name) of each import
    decides_results: bool  # False: the module sets DECIDES_RESULTS = False
    empty: bool  # no statements besides docstrings and imports


@functools.lru_cache(maxsize=512)
def _parsed(source: str) -> _Parsed:
    """A module's source, parsed once per distinct source in a process. Comments, layout, docstrings and import
    lines are not part of its `code`; `import a.b as c` is (0, "a.b", "", "c") in `imports`."""
    tree = ast.parse(source)
    imports = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports += [(0, alias.name, "", alias.asname or alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            imports += [(node.level, node.module or "", a.name, a.asname or a.name) for a in node.names]
    decides_results = not any(_declares_no_results(statement) for statement in tree.body)
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list):
                kept = [s for s in block if not isinstance(s, (ast.Import, ast.ImportFrom))]
                if field == "body" and kept and _is_docstring(kept[0]):
                    kept = kept[1:]
                setattr(node, field, kept)
    return _Parsed(ast.dump(tree, include_attributes=False), tuple(imports), decides_results, not tree.body)


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def _declares_no_results(statement: ast.stmt) -> bool:
    """Whether a module-level statement is `DECIDES_RESULTS = False`."""
    if isinstance(statement, ast.Assign):
        targets = statement.targets
    elif isinstance(statement, ast.AnnAssign):
        targets = [statement.target]
    else:
        return False
    named = any(isinstance(target, ast.Name) and target.id == "DECIDES_RESULTS" for target in targets)
    return named and isinstance(statement.value, ast.Constant) and statement.value.value is False
