"""Chunks of a cached computation shared between processes, coordinated only through the result cache.

A process takes a chunk that is neither cached nor claimed. A claim is a lock file beside the entry
(`<entry>.claim`), created atomically (O_CREAT | O_EXCL) and naming its owner's host and PID; it is
removed once the entry is saved. A claim whose owner is gone is taken over: on this host, a PID that
no longer runs; from another host, a claim older than STALE_AFTER seconds. Two processes that take over
the same stale claim at once both compute the chunk, which costs time but never changes a result
(entries are written atomically and the computation is deterministic).

Three ways to share the chunks of one run:

- workers: `cached_chunks` forks `worker_count()` - 1 helper processes after the model is loaded
  (each and the parent at one thread), and every process takes chunks in order;
- shards: `HELPERS_SHARD=i/n` (the runner's `--shard i/n`) makes a process take chunks i, i + n, ...
  first, then every other chunk nobody holds, so n shards started together split each run evenly and
  a shard that never starts delays nothing;
- any mix of the two, on one or several machines sharing the cache folder.
"""

import json
import logging
import os
import socket
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from helpers.storage import timers

DECIDES_RESULTS = False  # where and how results are kept, not what they are (helpers.storage.code_hash)
WORKERS_ENV = "HELPERS_WORKERS"  # processes per cached computation (default: the cores this process may use)
SHARD_ENV = "HELPERS_SHARD"  # "i/n": this process is shard i of n
STALE_AFTER = 6 * 3600  # seconds after which a claim from another host counts as abandoned
POLL_SECONDS = 0.2  # how often a process waiting for another's chunk looks again
# a claim still unreadable this long after it was created lost its writer; one taken sooner was often being filled,
# and two processes computed its chunk (47 of 800 instant chunks at 2 workers, the copy ledger's count)
FILLING_SECONDS = 10.0

Chunk = tuple[Path, Callable[[], None]]  # an entry's path, and the call that computes and saves it


def worker_count() -> int:
    """Processes that compute one run's chunks: HELPERS_WORKERS, else the cores available; 1 once CUDA
    is initialised (a forked child cannot use the parent's CUDA context)."""
    torch = sys.modules.get("torch")  # not imported: no CUDA context either (the runner never imports it)
    if torch is not None and torch.cuda.is_initialized():
        return 1
    value = os.environ.get(WORKERS_ENV, "")
    if value:
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"{WORKERS_ENV}={value!r} must be a whole number >= 1")
        return int(value)
    return len(os.sched_getaffinity(0))


def shard() -> tuple[int, int]:
    """(i, n) from HELPERS_SHARD="i/n" (default (0, 1): the only shard)."""
    value = os.environ.get(SHARD_ENV, "")
    if not value:
        return 0, 1
    index, _, count = value.partition("/")
    if not (index.isdigit() and count.isdigit() and 0 <= int(index) < int(count)):
        raise ValueError(f"{SHARD_ENV}={value!r} must be i/n with 0 <= i < n")
    return int(index), int(count)


def shard_order(n_chunks: int) -> list[int]:
    """Chunk indices in the order this process takes them: its shard's share first, then the rest."""
    index, count = shard()
    return sorted(range(n_chunks), key=lambda j: (j % count != index, j))


def _claim_path(entry: Path) -> Path:
    return entry.with_name(entry.name + ".claim")


def _claim(entry: Path) -> Path | None:
    """Create the entry's claim (None when another process holds it)."""
    path = _claim_path(entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return None
    with os.fdopen(fd, "w") as handle:
        json.dump({"host": socket.gethostname(), "pid": os.getpid()}, handle)
    return path


def _is_stale(claim: Path) -> bool:
    """True when the claim's owner is gone (see the module docstring); False while it may still work."""
    try:
        age = time.time() - claim.stat().st_mtime
        text = claim.read_text()
    except FileNotFoundError:
        return False  # released meanwhile
    except OSError:
        return True  # unreadable
    try:
        owner = json.loads(text)
    except ValueError:  # empty or cut short: its writer is filling it now, or died between creating and filling it
        return age > FILLING_SECONDS
    if owner.get("host") != socket.gethostname():
        return age > STALE_AFTER
    try:
        os.kill(int(owner["pid"]), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # a live process of another user
    return False


def _take(entry: Path, compute: Callable[[], None]) -> bool:
    """Compute the chunk if it is missing and unclaimed (taking over a stale claim); True once it is on disk."""
    if entry.exists():
        return True
    claim = _claim(entry)
    if claim is None and _is_stale(_claim_path(entry)):
        _claim_path(entry).unlink(missing_ok=True)
        claim = _claim(entry)
    if claim is None:
        return False
    try:
        if not entry.exists():
            compute()
    finally:
        claim.unlink(missing_ok=True)
    return True


def take_free(chunks: list[Chunk], on_done: Callable[[], None] = lambda: None) -> None:
    """One pass over `chunks`: compute each that is neither on disk nor claimed."""
    for entry, compute in chunks:
        if not entry.exists() and _take(entry, compute):
            on_done()


def wait_for(chunks: list[Chunk], on_done: Callable[[], None] = lambda: None) -> None:
    """Return once every chunk is on disk, computing those whose claim was abandoned or released unsaved."""
    waiting = [chunk for chunk in chunks if not chunk[0].exists()]
    while waiting:
        still = []
        for entry, compute in waiting:
            if _take(entry, compute):
                on_done()
            else:
                still.append((entry, compute))
        waiting = still
        if waiting:
            time.sleep(POLL_SECONDS)


def compute_all(chunks: list[Chunk], on_done: Callable[[], None] = lambda: None) -> None:
    """Compute every missing chunk, with worker_count() processes on this machine (forked helpers at
    one thread each), sharing the work with any other process that uses the same cache folder."""
    n_workers = min(worker_count(), len(chunks))
    if n_workers == 1:
        take_free(chunks, on_done)
        wait_for(chunks, on_done)
        return
    import torch  # already loaded by whatever computes the chunks

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    children = [_fork_helper(chunks) for _ in range(n_workers - 1)]
    try:
        take_free(chunks, on_done)
    finally:
        for pid in children:  # reaped before waiting, so a helper that died leaves a claim of a dead PID
            os.waitpid(pid, 0)
        torch.set_num_threads(threads)
    wait_for(chunks, on_done)


def _fork_helper(chunks: list[Chunk]) -> int:
    """Fork a process that takes free chunks at one thread and exits; returns its PID to the parent.

    The child writes nothing to the parent's streams (a notebook kernel's streams belong to the
    parent); a chunk whose computation fails in it is left unclaimed, and the parent, computing it
    itself, raises the error."""
    import torch

    pid = os.fork()
    if pid:
        return pid
    status = 1
    try:
        sys.stdout = sys.stderr = open(os.devnull, "w")
        logging.disable(logging.CRITICAL)
        warnings.simplefilter("ignore")
        torch.set_num_threads(1)
        take_free(chunks)
        status = 0
    finally:
        timers.flush()
        os._exit(status)
