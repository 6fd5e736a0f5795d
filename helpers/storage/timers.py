"""Where a notebook's time goes: CPU and wall seconds per part of the work, per process, for run.json.

`timed(part)` (a context manager or a decorator) adds the time spent inside it to `part`, less the time of any
`timed` block inside it (each second counts in one part):

- "forward": the engine's calls (run_head_sets, the forwards inside a probe);
- "vision": the vision tower (run_head_sets' once per item);
- "items": stimuli rendered (build_items) and processor batches (build_batch);
- "cache_read", "cache_write": the result cache's entries read and written;
- "hashing": each run_head_sets call's copy digests for the copy ledger.

Under a run (LEDGER_ENV set), each process writes its sums to <folder>/<notebook>.<pid>.times.json every few
seconds while it works and when it exits (forked chunk workers: `flush` before `os._exit`). `collect_times` sums them
per notebook: CPU seconds per part and the rest (the process's CPU not inside any part: pandas, figures, Python
between calls), and the kernel's wall seconds per part (the forked workers' wall overlaps the kernel's).
"""

import atexit
import json
import os
import time
from contextlib import contextmanager
from pathlib import Path

from helpers.storage.ledger import LEDGER_ENV, NOTEBOOK_ENV

DECIDES_RESULTS = False  # measures time, never changes a result (helpers.storage.code_hash)
PARTS = ("forward", "vision", "items", "cache_read", "cache_write", "hashing")
FLUSH_SECONDS = 5.0  # a working process rewrites its file at most this often
SUFFIX = ".times.json"

_cpu = dict.fromkeys(PARTS, 0.0)  # exclusive CPU seconds per part in this process
_wall = dict.fromkeys(PARTS, 0.0)  # exclusive wall seconds per part
_open: list[list[float]] = []  # per open block: [cpu, wall] of the blocks timed inside it
_state = {"forked": False, "began": time.perf_counter(), "flushed": 0.0}


@contextmanager
def timed(part: str):
    """Add the time inside the block, less that of the timed blocks inside it, to `part`."""
    cpu, wall = time.process_time(), time.perf_counter()
    _open.append([0.0, 0.0])
    try:
        yield
    finally:
        inner_cpu, inner_wall = _open.pop()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        _cpu[part] += cpu - inner_cpu
        _wall[part] += wall - inner_wall
        if _open:
            _open[-1][0] += cpu
            _open[-1][1] += wall
        elif time.perf_counter() - _state["flushed"] > FLUSH_SECONDS:
            flush()


def sums() -> dict:
    """This process's CPU and wall seconds: in all (since it started or was forked) and per part."""
    return {
        "forked": _state["forked"],
        "cpu": time.process_time(),
        "wall": time.perf_counter() - _state["began"],
        "cpu_parts": dict(_cpu),
        "wall_parts": dict(_wall),
    }


def flush() -> None:
    """Write this process's sums into the run's ledger folder (nothing outside a run)."""
    _state["flushed"] = time.perf_counter()
    folder = os.environ.get(LEDGER_ENV)
    if not folder:
        return
    path = Path(folder) / f"{os.environ.get(NOTEBOOK_ENV, 'session')}.{os.getpid()}{SUFFIX}"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(sums()))
    tmp.replace(path)


def _forked() -> None:
    """In a forked child: its own sums from zero (its CPU clock starts at zero too)."""
    for part in PARTS:
        _cpu[part] = _wall[part] = 0.0
    _open.clear()
    _state.update(forked=True, began=time.perf_counter(), flushed=0.0)


os.register_at_fork(after_in_child=_forked)
atexit.register(flush)


def collect_times(folder: Path, walls: dict) -> dict:
    """run.json's `times`: per notebook (its files under `folder`) the CPU seconds of its processes in all, per part
    and the rest, and its kernel's wall seconds per part and the rest of `walls[notebook]` (the runner's seconds)."""
    notebooks = {}
    for path in sorted(Path(folder).glob(f"*{SUFFIX}")):
        record = json.loads(path.read_text())
        sums_ = notebooks.setdefault(path.name.split(".")[0], _empty())
        sums_["processes"] += 1
        sums_["cpu"] += record["cpu"]
        for part in PARTS:
            sums_["cpu_parts"][part] += record["cpu_parts"][part]
            sums_["wall_parts"][part] += 0.0 if record["forked"] else record["wall_parts"][part]
    for notebook, sums_ in notebooks.items():
        sums_["cpu_parts"]["rest"] = sums_["cpu"] - sum(sums_["cpu_parts"][part] for part in PARTS)
        sums_["wall"] = wall = walls.get(notebook)
        sums_["wall_parts"]["rest"] = None if wall is None else wall - sum(sums_["wall_parts"][p] for p in PARTS)
    return {"parts": "CPU seconds of the notebook's processes, wall seconds of its kernel", "notebooks": notebooks}


def _empty() -> dict:
    zeros = dict.fromkeys(PARTS, 0.0)
    return {"processes": 0, "cpu": 0.0, "cpu_parts": dict(zeros), "wall_parts": dict(zeros)}
