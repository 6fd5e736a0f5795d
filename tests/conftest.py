"""Shared fixtures. Tests run their cached computations in one process (HELPERS_WORKERS=1) unless a test
asks for more: a compute function's side effects (e.g. a list of the chunks it saw) are then visible to the
test. `smoke_run` executes every notebook once per test session at smoke sizes (`python -m helpers.run
--smoke`, into build/smoke/); the notebook and browser tests read what it wrote."""

import subprocess
import sys

import pytest

from helpers.storage import paths
from helpers.storage.workers import WORKERS_ENV


@pytest.fixture(autouse=True, scope="session")
def copies_counted():
    """The tests run as a run: the copy ledger's counter installed in the engine, as helpers.runner.params.gather
    installs it for a notebook (the cache keeps each entry's copy digests)."""
    from helpers.engine import copy_hook, copy_ledger

    copy_ledger.install_counter()
    yield
    copy_hook.uninstall()


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


# The embedded toy and three head-sets of it, for the engine-level tests that need no thread setting of their own
# (a module may define its own `lm` or `sets`).
@pytest.fixture(scope="module")
def lm():
    from helpers.engine.loading import load_model  # here, so that the conftest imports no torch

    return load_model("toy")


@pytest.fixture(scope="module")
def sets(lm):
    """[3, L, H]: one head in the first layer, every head of the upper half, every head."""
    import numpy as np

    n_layers, n_heads = len(lm.adapter.candidate_layers), lm.adapter.n_heads
    out = np.zeros((3, n_layers, n_heads), dtype=bool)
    out[0, 0, 3] = True
    out[1, n_layers // 2 :] = True
    out[2] = True
    return out
