"""Results on disk, keyed by a hash of the parameters and of the code that computes them.

Entries are `.npz` files of named arrays plus a JSON header, loaded with `allow_pickle=False` (nothing
on disk can execute code), written atomically (`helpers.files.atomic_write`: temp file + rename) so a
killed run never leaves a half-written entry under a valid name. A truncated or corrupt entry is
detected on load, removed and recomputed. `cached_chunks` splits a long per-item computation into
chunks, so a rerun after a crash recomputes only the missing ones; a progress bar counts the chunks
already on disk as done. Missing chunks are computed by several processes at once (helpers/workers.py:
forked workers, shards).
"""

import ast
import functools
import hashlib
import json
import os
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from tqdm import tqdm

from helpers import workers
from helpers.files import atomic_write

PROGRESS_ENV = "HELPERS_PROGRESS"  # "0": no progress bars (helpers.run sets it: executed notebooks keep no bars)
_HEADER = "__header__"
_PROJECT_ROOT = Path(__file__).resolve().parent.parent
# modules whose code never changes a result
NOT_RESULTS = frozenset({"helpers.cache", "helpers.files", "helpers.paths", "helpers.workers"})


def code_version(module_name: str) -> str:
    """Short hash of the code of project module `module_name` and of every project module it imports,
    transitively (found from the import statements), so a result is recomputed when any code it ran
    changed. Docstrings and comments are not part of the hash: editing them reuses the cache. The cache
    machinery, its workers, file writing and the path table (NOT_RESULTS) decide where and how results are
    kept, not what they are, and are left out."""
    digest = hashlib.sha256()
    for name in sorted(_project_imports(module_name) - NOT_RESULTS):
        digest.update(f"{name}\n{_code_text(_module_path(name))}\n".encode())
    return digest.hexdigest()[:12]


def _module_path(name: str) -> Path:
    base = _PROJECT_ROOT.joinpath(*name.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def _is_project_module(name: str) -> bool:
    return name.split(".")[0] == "helpers" and _module_path(name).exists()


@functools.cache
def _project_imports(module_name: str) -> frozenset[str]:
    """`module_name` and the project modules it imports, transitively (a package's __init__ included)."""
    seen, todo = set(), [module_name]
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__ too
            prefix = ".".join(parts[:i])
            if prefix not in seen and _is_project_module(prefix):
                seen.add(prefix)
                todo.extend(_imports_of(prefix))
    return frozenset(seen)


def _imports_of(name: str) -> list[str]:
    tree = ast.parse(_module_path(name).read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
            found += [f"{node.module}.{alias.name}" for alias in node.names]  # `from helpers import stats`
    return [n for n in found if _is_project_module(n)]


def _code_text(path: Path) -> str:
    """The module's syntax tree without docstrings, as text: comments and layout do not change it."""
    return _tree_text(path.read_text())


@functools.lru_cache(maxsize=512)
def _tree_text(source: str) -> str:
    """_code_text of a module's source, parsed once per distinct source in a process."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, include_attributes=False)


def _canonical(value):
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in sorted(value.items())}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    raise TypeError(
        f"cache key parameter of type {type(value).__name__} ({value!r}) is not allowed; "
        "use str, int, float, bool, None, Path, or lists/dicts of those"
    )


def cache_key(params: dict) -> str:
    """sha256 of the canonical JSON of `params` (order-independent)."""
    text = json.dumps(_canonical(params), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


class ResultCache:
    """A folder of `<name>/<key>.npz` entries."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def path(self, name: str, params: dict) -> Path:
        return self.root / name / f"{cache_key(params)}.npz"

    def load(self, name: str, params: dict) -> dict[str, np.ndarray] | None:
        """The stored arrays, or None when absent; a corrupt entry is deleted and reported as absent."""
        path = self.path(name, params)
        if not path.exists():
            return None
        try:
            with np.load(path, allow_pickle=False) as npz:
                arrays = {key: npz[key] for key in npz.files}  # reading every member checks its CRC
            header = json.loads(str(arrays.pop(_HEADER)))
            if header["params"] != _canonical(params):
                raise ValueError("header does not match the requested parameters")
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, json.JSONDecodeError):
            path.unlink(missing_ok=True)
            return None
        return arrays

    def save(self, name: str, params: dict, arrays: dict[str, np.ndarray]) -> Path:
        """Atomically write `arrays` (object arrays are refused: they would need pickle)."""
        for key, value in arrays.items():
            if np.asarray(value).dtype == object:
                raise TypeError(f"array {key!r} has dtype object, which cannot be stored without pickle")
        path = self.path(name, params)
        path.parent.mkdir(parents=True, exist_ok=True)
        header = json.dumps({"name": name, "params": _canonical(params)})

        def write(tmp: Path) -> None:
            with tmp.open("wb") as handle:  # a handle: np.savez would append .npz to a path
                np.savez(handle, **{_HEADER: np.array(header)}, **arrays)

        atomic_write(path, write)
        return path

    def get_or_compute(self, name: str, params: dict, compute: Callable[[], dict]) -> dict[str, np.ndarray]:
        arrays = self.load(name, params)
        if arrays is None:
            arrays = {k: np.asarray(v) for k, v in compute().items()}
            self.save(name, params, arrays)
        return arrays

    def cached_chunks(
        self,
        name: str,
        params: dict,
        n_items: int,
        chunk_size: int,
        compute: Callable[[int, int], dict],
        prepare: Callable[[int, int], None] | None = None,
    ) -> dict[str, np.ndarray]:
        """Per-item arrays for items 0..n_items-1, computed chunk by chunk by `compute(start, stop)`
        (arrays with the item axis first) and concatenated; each chunk is its own cache entry.
        Leave `n_items` out of `params`: a larger run then reuses every full chunk of a smaller one.
        `prepare(start, stop)` runs in this process for every missing chunk before any is computed: what it
        leaves in memory (the engine's per-item records) reaches the workers forked afterwards."""
        if n_items < 1 or chunk_size < 1:
            raise ValueError(f"n_items={n_items} and chunk_size={chunk_size} must both be >= 1")
        bounds = [(start, min(start + chunk_size, n_items)) for start in range(0, n_items, chunk_size)]
        keys = [{**params, "chunk": [start, stop]} for start, stop in bounds]
        parts = [self.load(name, key) for key in keys]  # what is on disk first, so the bar's ETA is the work left
        missing = [i for i in workers.shard_order(len(bounds)) if parts[i] is None]
        if missing:
            for i in missing if prepare is not None else ():
                prepare(*bounds[i])
            entries = [self.path(name, key) for key in keys]
            chunks = [(entries[i], self._saver(name, keys[i], compute, *bounds[i])) for i in missing]
            with tqdm(
                total=len(bounds),
                initial=len(bounds) - len(missing),
                desc=name,
                unit="chunk",
                file=sys.stderr,
                mininterval=2,
                disable=os.environ.get(PROGRESS_ENV) == "0",
            ) as bar:

                def on_disk() -> None:  # counts the chunks other processes saved too
                    bar.update(sum(entry.exists() for entry in entries) - bar.n)

                workers.compute_all(chunks, on_disk)
                on_disk()
            for i in missing:
                parts[i] = self.load(name, keys[i])
                if parts[i] is None:
                    raise RuntimeError(f"chunk {keys[i]['chunk']} of {name} vanished from {self.root}")
        return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}

    def _saver(self, name: str, key: dict, compute: Callable[[int, int], dict], start: int, stop: int):
        """The call that computes chunk [start, stop) and saves it as the entry of `key`."""
        return lambda: self.save(name, key, {k: np.asarray(v) for k, v in compute(start, stop).items()})
