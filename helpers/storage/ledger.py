"""The copy ledger's lines: what each process of a run computed and read back, appended to the run's ledger folder.

A copy is one item's forward under one intervention or probe (helpers.engine.copy_ledger). The runner gives every
notebook's kernel the folder (LEDGER_ENV) and the notebook's name (NOTEBOOK_ENV); each process, the kernel
and the chunk workers it forks, appends JSON lines to <folder>/<notebook>.<pid>.jsonl (read by
helpers.runner.ledger):

- a chunk of a cached computation computed here: its computation, its cache entry, the copies computed inside it,
  their run_head_sets and probe calls, matmul FLOPs and CPU seconds, the chunk's CPU seconds, and the copies' digests;
- run_head_sets and probe calls outside any cached computation: the same per call, no entry, the computation named
  after the code that asked for them;
- a chunk read back from the cache: its computation, entry, copies and their digests (kept in the entry);
- a part of a chunk being computed read back from an entry of its own (a head-set's part,
  helpers.measures.set_chunks): the same as a chunk read back; the parts such a chunk saves as entries of their own are
  named in its line (`stored`), and its entry keeps the digests of the copies it read back as well as computed.

Without LEDGER_ENV nothing is written; the digests still go into each chunk's cache entry.
"""

import json
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

DECIDES_RESULTS = False  # counts what is computed, never changes it (helpers.storage.code_hash)
LEDGER_ENV = "HELPERS_LEDGER"  # the folder each process appends its lines to
NOTEBOOK_ENV = "HELPERS_NOTEBOOK"  # the notebook the process runs for (its lines' file name)
NO_LABEL = ("seed", "chunk", "head_sets")  # cache-key parameters that split a computation without naming it
# modules whose functions only carry copies for others: an uncached copy is named after the first caller outside
PASSING = (
    "helpers.engine",
    "helpers.measures.necessity",
    "helpers.measures.steering",
    "helpers.storage",
    "contextlib",
    "torch",
)


@dataclass
class Tally:
    """The copies computed inside one chunk of a cached computation (computing)."""

    computation: str
    digests: list = field(default_factory=list)  # one [n] uint64 array per run_head_sets call
    drawn: list = field(default_factory=list)  # one array per part read back from an entry of its own (part_read)
    stored: list = field(default_factory=list)  # the entries of the parts saved on their own (part_saved)
    calls: int = 0
    flops: float = 0.0
    copy_seconds: float = 0.0  # CPU seconds inside run_head_sets
    seconds: float = 0.0  # CPU seconds of the chunk, those of chunks computed inside it left out
    nested_seconds: float = 0.0

    def add(self, digests: np.ndarray, flops: float, seconds: float) -> None:
        self.digests.append(digests)
        self.calls += 1
        self.flops += flops
        self.copy_seconds += seconds

    def all_digests(self) -> np.ndarray:
        """The copies computed inside the chunk."""
        return np.concatenate(self.digests) if self.digests else np.zeros(0, dtype=np.uint64)

    def held_digests(self) -> np.ndarray:
        """The copies the chunk's entry holds: computed inside it or read back as its parts."""
        return np.concatenate([self.all_digests(), *self.drawn])


_OPEN: list[Tally] = []  # the chunks this process is computing, innermost last


def computation(name: str, key: dict) -> str:
    """A cached computation's name in the ledger: the cache's name and the short parameters of its key that are
    not per run ("necessity arms=matched+mismatched keys=image masking=hide row_group=all")."""
    params = key.get("params", key)
    parts = [name]
    for label, value in sorted(params.items()) if isinstance(params, dict) else ():
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            value = "+".join(value)
        if label not in NO_LABEL and isinstance(value, (str, int, float, bool)) and len(str(value)) <= 24:
            parts.append(f"{label}={value}")
    return " ".join(parts)


@contextmanager
def computing(name: str):
    """Around one chunk's computation: yields its Tally, which collects the copies computed inside."""
    tally = Tally(name)
    _OPEN.append(tally)
    began = time.process_time()
    try:
        yield tally
    finally:
        _OPEN.pop()
    spent = time.process_time() - began
    tally.seconds = spent - tally.nested_seconds
    if _OPEN:
        _OPEN[-1].nested_seconds += spent


def is_open() -> bool:
    """Whether copies counted now go anywhere: into a chunk being computed, or into a run's ledger folder."""
    return bool(_OPEN) or bool(os.environ.get(LEDGER_ENV))


def record_copies(digests: np.ndarray, flops: float, seconds: float) -> None:
    """One run_head_sets or probe call's copies: into the chunk being computed, else a line of their own."""
    if _OPEN:
        _OPEN[-1].add(digests, flops, seconds)
        return
    line = {"computation": f"uncached {_caller()}", "entry": None, "calls": 1, "flops": flops}
    _write({**line, "copy_seconds": seconds, "seconds": seconds, "digests": _hex(digests)})


def chunk_computed(tally: Tally, entry: Path) -> None:
    """A chunk computed here and saved as `entry`."""
    line = {"computation": tally.computation, "entry": str(entry), "calls": tally.calls, "flops": tally.flops}
    seconds = {"copy_seconds": tally.copy_seconds, "seconds": tally.seconds}
    _write({**line, **seconds, "stored": tally.stored, "digests": _hex(tally.all_digests())})


@contextmanager
def recorded():
    """Around part of the chunk being computed: yields a list that then holds the digests of each run_head_sets call
    made inside the block, one array per call (they count in the chunk as any other)."""
    tally, calls = _chunk(), []
    before = len(tally.digests)
    yield calls
    calls.extend(tally.digests[before:])


def part_read(entry: Path, digests: np.ndarray) -> None:
    """A part of the chunk being computed read back from the cache entry `entry`, holding the copies `digests`."""
    tally = _chunk()
    tally.drawn.append(np.asarray(digests, dtype=np.uint64))
    chunk_read(tally.computation, entry, digests)


def part_saved(entry: Path) -> None:
    """A part of the chunk being computed, its copies computed here, saved as the cache entry `entry` of its own."""
    _chunk().stored.append(str(entry))


def _chunk() -> Tally:
    """The chunk this process is computing (the innermost)."""
    if not _OPEN:
        raise RuntimeError(
            "parts of a chunk are read and saved only inside its computation (ResultCache.cached_chunks)"
        )
    return _OPEN[-1]


def chunk_read(name: str, entry: Path, digests: np.ndarray) -> None:
    """A chunk read back from the cache entry `entry`, holding the copies `digests`."""
    _write({"computation": name, "entry": str(entry), "read": True, "digests": _hex(digests)})


def _hex(digests: np.ndarray) -> str:
    return np.asarray(digests, dtype="<u8").tobytes().hex()


def _caller() -> str:
    """module.function of the first frame outside PASSING: the code that asked for copies outside the cache."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__", "").startswith(PASSING):
        frame = frame.f_back
    return "?" if frame is None else f"{frame.f_globals.get('__name__')}.{frame.f_code.co_name}"


def _write(line: dict) -> None:
    folder = os.environ.get(LEDGER_ENV)
    if not folder:
        return
    path = Path(folder) / f"{os.environ.get(NOTEBOOK_ENV, 'session')}.{os.getpid()}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:  # a file per process: no two processes write into one
        handle.write(json.dumps({**line, "time": time.time()}) + "\n")
