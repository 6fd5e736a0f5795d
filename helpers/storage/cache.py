"""Results on disk, keyed by a hash of the inputs and of the code that computes them.

`computation_key` is the one place a cache key is made: every cached computation keys its results with the
model, dtype, device kind, data, parameters and code version (helpers.storage.code_hash) that decide them. Entries are
`.npz` files of named arrays plus a JSON header, loaded with `allow_pickle=False` (nothing on disk can execute
code), written atomically (`helpers.storage.files.atomic_write`: temp file + rename) so a killed run never leaves a
half-written entry under a valid name. A truncated or corrupt entry is detected on load, removed and
recomputed. `cached_chunks` splits a long per-item computation into chunks, so a rerun after a crash
recomputes only the missing ones; a progress bar counts the chunks already on disk as done. Missing chunks are
computed by several processes at once (helpers/storage/workers.py: forked workers, shards).
"""

import functools
import hashlib
import importlib.metadata
import json
import os
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from tqdm import tqdm

from helpers.storage import timers, workers
from helpers.storage.chunk_store import ChunkStore
from helpers.storage.code_hash import code_version
from helpers.storage.files import atomic_write

DECIDES_RESULTS = False  # where and how results are kept, not what they are (helpers.storage.code_hash)
PROGRESS_ENV = "HELPERS_PROGRESS"  # "0": no progress bars (helpers.run sets it: executed notebooks keep no bars)
_HEADER = "__header__"
_COPIES = "__copies__"  # an entry's copy digests (helpers.storage.ledger), not one of its results


def computation_key(
    *,
    model_fingerprint: str,
    processor_fingerprint: str,
    dtype: str,
    device_kind: str,
    corpus,
    params: dict,
    code_module: str,
) -> dict:
    """The cache key (ResultCache's `params`) of a computation's results, made of everything that decides them:
    the model (`model_fingerprint`: its files) and its processor (`processor_fingerprint`: its configuration), the
    dtype it runs in, the kind of device it runs on ("cpu", "cuda": their kernels round differently), the data
    (`corpus`: a corpus or task identity), the computation's own `params`, the code of module `code_module` and of
    what it imports (code_version), and the runtime that runs that code (runtime_versions: torch, transformers).
    Leave the item count out of `params` for cached_chunks: a larger run then reuses a smaller one's chunks."""
    return {
        "model": model_fingerprint,
        "processor": processor_fingerprint,
        "dtype": dtype,
        "device": device_kind,
        "corpus": corpus,
        "params": params,
        "code": code_version(code_module),
        "runtime": runtime_versions(),
    }


RUNTIME = ("torch", "transformers")  # the installed packages whose kernels and model code decide every result


@functools.cache
def runtime_versions() -> dict[str, str]:
    """The installed versions of RUNTIME (read from the packages' metadata: nothing is imported)."""
    return {name: importlib.metadata.version(name) for name in RUNTIME}


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
        entry = self.load_entry(name, params)
        return None if entry is None else entry[0]

    @timers.timed("cache_read")
    def load_entry(self, name: str, params: dict) -> tuple[dict[str, np.ndarray], np.ndarray] | None:
        """load's arrays and the digests of the copies they hold (none for an entry saved without)."""
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
        return arrays, arrays.pop(_COPIES, np.zeros(0, dtype=np.uint64))

    @timers.timed("cache_write")
    def save(self, name: str, params: dict, arrays: dict[str, np.ndarray], copies: np.ndarray | None = None) -> Path:
        """Atomically write `arrays` (object arrays are refused: they would need pickle) and the digests of the
        `copies` computed for them (helpers.storage.ledger)."""
        for key, value in arrays.items():
            if np.asarray(value).dtype == object:
                raise TypeError(f"array {key!r} has dtype object, which cannot be stored without pickle")
        path = self.path(name, params)
        path.parent.mkdir(parents=True, exist_ok=True)
        header = json.dumps({"name": name, "params": _canonical(params)})

        def write(tmp: Path) -> None:
            with tmp.open("wb") as handle:  # a handle: np.savez would append .npz to a path
                extra = {} if copies is None else {_COPIES: np.asarray(copies, dtype=np.uint64)}
                np.savez(handle, **{_HEADER: np.array(header)}, **extra, **arrays)

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
        one_copy_per_item: bool = False,
    ) -> dict[str, np.ndarray]:
        """Per-item arrays for items 0..n_items-1, computed chunk by chunk by `compute(start, stop)`
        (arrays with the item axis first) and concatenated; each chunk is its own cache entry.
        Leave `n_items` out of `params`: a larger run then reuses every full chunk of a smaller one.
        `prepare(start, stop)` runs in this process for every missing chunk before any is computed: what it
        leaves in memory (the engine's per-item records) reaches the workers forked afterwards.
        `one_copy_per_item`: `compute` makes one copy per item, in item order (a read's batch rows; checked when
        the chunk is saved). A run's last chunk then also meets another run's of the same start: a missing chunk
        is cut from a longer entry on disk (a larger run's), or completed from the longest shorter one (a smaller
        run's last chunk), only its items past that entry computed."""
        if n_items < 1 or chunk_size < 1:
            raise ValueError(f"n_items={n_items} and chunk_size={chunk_size} must both be >= 1")
        bounds = [(start, min(start + chunk_size, n_items)) for start in range(0, n_items, chunk_size)]
        store = ChunkStore(self, name, params, one_copy_per_item)
        keys = [store.key(start, stop) for start, stop in bounds]
        parts = [store.read_back(key) for key in keys]  # on disk first: the bar's ETA is the work left
        for i, (start, stop) in enumerate(bounds):
            if parts[i] is None and one_copy_per_item:
                parts[i] = store.cut_from_longer(start, stop, chunk_size)
        missing = [i for i in workers.shard_order(len(bounds)) if parts[i] is None]
        if missing:
            for i in missing if prepare is not None else ():
                prepare(*bounds[i])
            entries = [self.path(name, key) for key in keys]
            chunks = [(entries[i], store.saver(keys[i], compute, *bounds[i])) for i in missing]
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
