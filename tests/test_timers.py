"""helpers.storage.timers: exclusive seconds per part, written per process and summed per notebook."""

import json
import os

import numpy as np

from helpers.storage import ledger, timers


class _Clock:
    """A process and a wall clock that advance only when told (the test's seconds, not the machine's)."""

    def __init__(self):
        self.cpu, self.wall = 0.0, 1000.0

    def spend(self, cpu: float, wall: float) -> None:
        self.cpu, self.wall = self.cpu + cpu, self.wall + wall


def test_a_block_inside_another_counts_in_its_own_part_only(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(timers.time, "process_time", lambda: clock.cpu)
    monkeypatch.setattr(timers.time, "perf_counter", lambda: clock.wall)
    monkeypatch.setattr(timers, "_cpu", dict.fromkeys(timers.PARTS, 0.0))
    monkeypatch.setattr(timers, "_wall", dict.fromkeys(timers.PARTS, 0.0))
    monkeypatch.setitem(timers._state, "flushed", clock.wall)  # no flush inside the test
    with timers.timed("forward"):
        clock.spend(0.05, 0.06)
        with timers.timed("vision"):
            clock.spend(0.1, 0.2)
        clock.spend(0.01, 0.01)
    assert abs(timers._cpu["vision"] - 0.1) < 1e-12 and abs(timers._wall["vision"] - 0.2) < 1e-12
    assert abs(timers._cpu["forward"] - 0.06) < 1e-12  # the vision tower's 0.1 s left out
    assert abs(timers._wall["forward"] - 0.07) < 1e-12


def test_collect_sums_processes_and_leaves_the_rest(tmp_path, monkeypatch):
    monkeypatch.setenv(ledger.LEDGER_ENV, str(tmp_path))
    monkeypatch.setenv(ledger.NOTEBOOK_ENV, "04_ncs")
    zeros = dict.fromkeys(timers.PARTS, 0.0)
    kernel = {"forked": False, "cpu": 10.0, "wall": 30.0, "cpu_parts": zeros | {"forward": 4.0, "items": 1.0}}
    kernel["wall_parts"] = zeros | {"forward": 5.0, "cache_read": 2.0}
    worker = {"forked": True, "cpu": 8.0, "wall": 9.0, "cpu_parts": zeros | {"forward": 6.0}}
    worker["wall_parts"] = zeros | {"forward": 7.0}
    (tmp_path / "04_ncs.1.times.json").write_text(json.dumps(kernel))
    (tmp_path / "04_ncs.2.times.json").write_text(json.dumps(worker))
    timers.flush()  # this process: a third file of 04_ncs
    record = timers.collect_times(tmp_path, {"04_ncs": 20.0})["notebooks"]["04_ncs"]
    assert record["processes"] == 3
    mine = json.loads((tmp_path / f"04_ncs.{os.getpid()}{timers.SUFFIX}").read_text())
    assert record["cpu_parts"]["forward"] == 10.0 + mine["cpu_parts"]["forward"]
    assert abs(record["cpu"] - sum(record["cpu_parts"].values())) < 1e-9  # the rest closes the sum
    mine_walls = sum(mine["wall_parts"].values())
    assert abs(record["wall_parts"]["rest"] - (20.0 - 7.0 - mine_walls)) < 1e-9  # the worker's wall left out


def test_run_json_holds_the_times_and_the_floor_where_the_run_ran(tmp_path):
    from helpers import run
    from helpers.storage import runs

    folders = runs.in_folder(tmp_path)
    record = {"computed": 100, "read_back": 0, "calls": 5, "flops": 4e11, "copy_seconds": 8.0, "computations": {}}
    copies = {"notebooks": {"04_ncs": record}, "duplicates": 0}
    times = {"parts": "", "notebooks": {"04_ncs": {"cpu": 30.0}}}
    how = {"jobs": 1, "wall_seconds": 20.0}
    run.write_run_json(folders, {}, {"04_ncs": 20.0}, how, copies, times, peaks=(1e11, 2e11))
    written = json.loads(folders.run_json.read_text())
    assert written["times"]["notebooks"]["04_ncs"]["cpu"] == 30.0
    floor = written["floor"]
    assert floor["peaks_at_start_and_end"] == [1e11, 2e11] and floor["peak_flops_per_core"] == 2e11
    cores = floor["cores"]
    assert floor["floor_seconds"] == 4e11 / 2e11 / cores and floor["wall_over_floor"] == 20.0 / (2.0 / cores)
    assert floor["notebooks"]["04_ncs"]["floor_seconds_per_copy"] == 0.02  # 4e9 FLOP at 2e11 on one core


def test_bench_projects_a_notebooks_wall_from_its_copies_and_its_time_outside_the_calls():
    from bench.bench_floor import projection

    parts = {"forward": 10.0, "hashing": 2.0, "items": 3.0, "vision": 1.0, "cache_read": 1.0, "cache_write": 1.0}
    times = {"cpu": 30.0, "wall": 20.0, "cpu_parts": parts | {"rest": 12.0}}
    ledger_ = {"notebooks": {"04_ncs": {"flops": 2e11, "calls": 10}}}
    run = {"ledger": ledger_, "times": {"notebooks": {"04_ncs": times}}}
    call = {"per_copy_over_floor": 1.5, "fixed_seconds": 0.01, "peak_flops": 2e11}  # measured where the peak is 2e11
    result = projection(run, call, peak=1e11)["04_ncs"]
    assert result["cpu_seconds_per_group"] == {"calls": 12.0, "items": 4.0, "cache": 2.0, "rest": 12.0}
    assert result["projected_call_seconds"] == 1.5 * 2.0 + 10 * 0.01 * 2  # FLOPs at 1.5x the floor, fixed per call
    assert abs(result["projected_wall_seconds"] - (30.0 - 12.0 + 3.2) * 20.0 / 30.0) < 1e-12
    assert not result["within_tolerance"]  # 14.1 s against 20 s


def test_a_forked_worker_writes_its_own_times(tmp_path, monkeypatch):
    from helpers.storage import workers
    from helpers.storage.cache import ResultCache

    monkeypatch.setenv(ledger.LEDGER_ENV, str(tmp_path / "ledger"))
    monkeypatch.setenv(ledger.NOTEBOOK_ENV, "nb")
    monkeypatch.setenv(workers.WORKERS_ENV, "2")
    ResultCache(tmp_path / "cache").cached_chunks("x", {"run": 0}, 40, 1, lambda a, b: {"v": np.arange(a, b)})
    timers.flush()
    written = [json.loads(p.read_text()) for p in (tmp_path / "ledger").glob(f"nb.*{timers.SUFFIX}")]
    assert sorted(record["forked"] for record in written) == [False, True]  # this process and its worker
    assert sum(record["cpu_parts"]["cache_write"] > 0 for record in written) >= 1  # the chunks' entries saved
