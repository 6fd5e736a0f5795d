"""Tests run their cached computations in one process (HELPERS_WORKERS=1) unless a test asks for more:
a compute function's side effects (e.g. a list of the chunks it saw) are then visible to the test."""

import pytest

from helpers.workers import WORKERS_ENV


@pytest.fixture(autouse=True)
def one_worker(monkeypatch):
    monkeypatch.setenv(WORKERS_ENV, "1")
