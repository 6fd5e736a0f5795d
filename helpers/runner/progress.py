"""The wait, visible: while a notebook runs, a line a minute with its copies planned and done and the time left.

The copies done are those its processes computed or read back so far, counted from the ledger lines they write
(helpers.storage.ledger); the time left is the copies still to do at the per-copy CPU seconds `make bench` measured
for that notebook (build/bench/figures.json: the latest run's, else bench_figures' NCS copy), shared by the workers;
without a bench, at the rate of the copies done so far.
"""

import json
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from helpers.storage import paths

EVERY_SECONDS = 60.0  # how often a running notebook's line is printed


class CopiesDone:
    """The copies a notebook's processes computed or read back so far, read from its ledger lines as they come."""

    def __init__(self, folder: Path, notebook: str):
        self.folder, self.notebook = Path(folder), notebook
        self.offsets: dict[Path, int] = {}  # per file: the end of the last whole line counted
        self.done = 0

    def count(self) -> int:
        for path in sorted(self.folder.glob(f"{self.notebook}.*.jsonl")):
            with path.open() as handle:
                handle.seek(self.offsets.get(path, 0))
                while (text := handle.readline()).endswith("\n"):  # a line being written is counted next time
                    self.done += len(json.loads(text)["digests"]) // 16  # 8 bytes a copy, in hex
                    self.offsets[path] = handle.tell()
        return self.done


def bench_seconds_per_copy(notebook: str) -> float | None:
    """CPU seconds per copy for `notebook` from the latest `make bench` (None when it has not run)."""
    path = paths.BENCH_OUT / "figures.json"
    if not path.exists():
        return None
    bench = json.loads(path.read_text())
    measured = bench.get("run_floor", {}).get("notebooks", {}).get(notebook, {}).get("seconds_per_copy")
    return measured or bench.get("cuts", {}).get("ncs", {}).get("per_copy_seconds")


def line(notebook: str, done: int, planned: int, elapsed: float, per_copy: float | None, workers: int) -> str:
    """'03_cers: 12,300 of about 78,400 copies (16%), about 14 min left (at 5.3 ms a copy)'."""
    head = f"      {notebook}: {done:,}" + (f" of about {planned:,} copies" if planned else " copies")
    if not planned or done > planned:
        return head
    if per_copy is None and done:
        per_copy, source = elapsed * workers / done, "so far"
    else:
        source = "in make bench"
    left = "" if per_copy is None else f", about {(planned - done) * per_copy / workers / 60:.0f} min left"
    rate = "" if per_copy is None else f" (at {1e3 * per_copy:.1f} ms a copy {source})"
    return f"{head} ({100 * done / planned:.0f}%){left}{rate}"


@contextmanager
def showing_progress(folder: Path, notebook: str, planned: int, workers: int, every: float = EVERY_SECONDS):
    """Inside, a line (`line`) every `every` seconds while the notebook runs."""
    done, per_copy, start, stop = CopiesDone(folder, notebook), bench_seconds_per_copy(notebook), time.time(), None

    def report() -> None:
        while not stop.wait(every):
            print(line(notebook, done.count(), planned, time.time() - start, per_copy, workers), flush=True)

    stop = threading.Event()
    thread = threading.Thread(target=report, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
