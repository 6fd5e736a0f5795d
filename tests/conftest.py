"""Shared fixtures. Tests run their cached computations in one process (HELPERS_WORKERS=1) unless a test
asks for more: a compute function's side effects (e.g. a list of the chunks it saw) are then visible to the
test. `smoke_run` executes every notebook once per test session at smoke sizes (`python -m helpers.run
--smoke`, into build/smoke/); the notebook and browser tests read what it wrote."""

import subprocess
import sys

import pytest

from helpers.storage import paths
from helpers.storage.workers import WORKERS_ENV


@pytest.fixture(autouse=True)
def one_worker(monkeypatch):
    monkeypatch.setenv(WORKERS_ENV, "1")


def _published_files() -> dict:
    return {p: p.stat().st_mtime for root in (paths.PAPER_FIGURES, paths.DATA) for p in root.rglob("*") if p.is_file()}


@pytest.fixture(scope="session")
def smoke_run():
    """The smoke run's folder, with the published files' mtimes before and after it."""
    before = _published_files()
    proc = subprocess.run(
        [sys.executable, "-m", "helpers.run", "--smoke"], cwd=paths.ROOT, capture_output=True, text=True, timeout=2400
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {"folder": paths.BUILD / "smoke", "published_before": before, "published_after": _published_files()}


@pytest.fixture(autouse=True)
def no_probe_left_open():
    """Every test leaves the engine with no probe open (a leaked probe would act on later forwards)."""
    from helpers.engine import attention

    yield
    leaked = list(attention._ACTIVE)
    attention._ACTIVE.clear()
    assert not leaked, f"{len(leaked)} probe(s) left open"


@pytest.fixture(scope="module")
def two_threads():
    """torch computes on 2 threads for the module's tests, and on as many as before once they are done."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def threads_restored():
    """Every test leaves torch's thread count as it found it (a process-wide setting the later tests run under)."""
    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else None
    yield
    if before is not None:
        left = torch.get_num_threads()
        assert left == before, f"the test left torch on {left} threads, not the {before} it found"
