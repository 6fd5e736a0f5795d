"""Atomic writes, the content-hash index, and a cached computation killed with SIGKILL and resumed."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers.figures.writers import save_table
from helpers.storage import files, headsets, paths

ROOT = Path(__file__).resolve().parent.parent


def test_atomic_write_bytes_text_and_writer(tmp_path):
    target = tmp_path / "sub" / "out.txt"
    files.atomic_write(target, "first")
    files.atomic_write(target, b"second")
    assert target.read_text() == "second"
    files.atomic_write(target, lambda tmp: tmp.write_text("third"))
    assert target.read_text() == "third"
    assert [p.name for p in target.parent.iterdir()] == ["out.txt"]  # no temp file left behind
    assert target.stat().st_mode & 0o777 == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_failing_writer_keeps_the_old_file(tmp_path):
    target = tmp_path / "table.csv"
    target.write_text("old")

    def broken(tmp):
        tmp.write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        files.atomic_write(target, broken)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"]


def test_tables_and_head_sets_go_through_atomic_write(tmp_path, monkeypatch):
    written = []
    real = files.atomic_write
    monkeypatch.setattr("helpers.figures.writers.atomic_write", lambda p, c: written.append(p.name) or real(p, c))
    monkeypatch.setattr("helpers.storage.headsets.atomic_write", lambda p, c: written.append(p.name) or real(p, c))
    save_table(pd.DataFrame({"a": [1.0, 2.0]}), "t", tmp_path)
    mask = np.zeros((2, 3), bool)
    mask[1, 2] = True
    headsets.save(
        tmp_path / "s.json", model="toy", setting="cm-ord-last", selection="flat", mask=mask, scores=mask * 1.0
    )
    assert written == ["t.csv", "t.tex", "s.json"]
    assert (tmp_path / "t.csv").read_text() == "a\n1.000\n2.000\n"
    assert headsets.load(tmp_path / "s.json")["heads"] == [[1, 2]]


def test_a_table_prints_values_that_round_to_zero_without_a_sign(tmp_path):
    df = pd.DataFrame({"x": [-0.0004, 0.0004, -0.0006, float("nan")], "name": ["a", "b", "c", "d"]})
    save_table(df, "t", tmp_path)
    assert (tmp_path / "t.csv").read_text() == "x,name\n0.000,a\n0.000,b\n-0.001,c\n,d\n"
    assert df["x"].iloc[0] == -0.0004  # the caller's frame is left as it was


def test_file_hashes_are_read_once_per_version(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "FINGERPRINTS", tmp_path / "fingerprints.json")
    reads = []
    real = files._hash_content
    monkeypatch.setattr(files, "_hash_content", lambda p: reads.append(p.name) or real(p))
    data = tmp_path / "w.bin"
    data.write_bytes(bytes(1000))
    first = files.file_sha256(data)
    assert files.file_sha256(data) == first and reads == ["w.bin"]  # the second call used the index
    with data.open("r+b") as handle:  # one byte in the middle, same size
        handle.seek(500)
        handle.write(b"\x01")
    assert files.file_sha256(data) != first and reads == ["w.bin", "w.bin"]


RUN = """
import sys
from pathlib import Path
import numpy as np
from helpers.storage import paths
out = Path(sys.argv[1])
paths.FINGERPRINTS = out / "fingerprints.json"
from helpers.storage.cache import ResultCache
from helpers.measures.discovery import discover
from helpers.engine import load_model
cache = ResultCache(out / "results")
arrays = discover(load_model("toy"), "cm", "ord", n_strips=24, seed=0, cache=cache, strips_per_forward=2)
np.savez(out / "final.npz", **arrays)
"""
N_CHUNKS = 12  # 24 strips in chunks of 2


def _command(out: Path) -> list[str]:
    return [sys.executable, "-c", RUN, str(out)]


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")


def _entries(out: Path) -> dict[str, tuple[int, int]]:
    """Cache entries (name -> (inode, mtime_ns)), temp files excluded."""
    folder = out / "results" / "discovery"
    if not folder.exists():
        return {}
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in folder.glob("*.npz")}


def test_a_killed_chunked_run_resumes_without_rewriting_entries(tmp_path):
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    process = subprocess.Popen(_command(killed), env=_env(), stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not _entries(killed) and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.005)
    assert process.poll() is None, f"the run ended (exit {process.returncode}) before its first chunk was killed"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    before = _entries(killed)
    assert 1 <= len(before) < N_CHUNKS, len(before)
    assert subprocess.run(_command(killed), env=_env(), capture_output=True).returncode == 0
    after = _entries(killed)
    assert len(after) == N_CHUNKS
    assert {name: after[name] for name in before} == before  # no entry written before the kill was rewritten
    recomputed = set(after) - set(before)
    assert len(recomputed) == N_CHUNKS - len(before)  # only the missing chunks (the one in flight among them)
    assert subprocess.run(_command(clean), env=_env(), capture_output=True).returncode == 0
    with np.load(killed / "final.npz") as resumed, np.load(clean / "final.npz") as reference:
        assert sorted(resumed.files) == sorted(reference.files)
        for name in reference.files:
            assert resumed[name].tobytes() == reference[name].tobytes(), name
    print(f"chunks before the kill {len(before)}, after the rerun {len(after)}, recomputed {len(recomputed)}")
