"""`make figures` against its floor: the copy ledger's matmul FLOPs at this machine's matmul peak, over its cores.

    python -m bench.bench_floor [--run-json PATH]

The floor of a run is the time its copies' matmuls (run.json's `ledger`, helpers/runner/ledger.py) take at the fp32
matmul peak of one core measured here, spread over every core: what no code could beat on this machine. The run is
the latest run.json (the published run's or a run folder's under runs/, whichever was written last) unless given;
its copies must have been computed, not read back from the cache, for the ratio to mean anything (the line says how
many were read back). Per notebook: its wall seconds against its own floor, and the CPU seconds per computed copy
against one copy's FLOPs at the peak of one core.

Prints the table and adds `run_floor` and `wall_over_floor` to build/bench/figures.json (bench_figures writes the
rest).
"""

import argparse
import json
import os
import time
from pathlib import Path

import torch

from helpers.storage import paths

TARGET = 1.3  # make figures at most this times its floor (issue 57)
# [m, k] x [k, n] matmuls whose best rate is the peak: 21 copies of a 150-row toy item through its MLP
# ([T * 21, D] x [D, F], bench_figures' floor), and a large square one
SHAPES = ((21 * 150, 128, 256), (1024, 1024, 1024))


def matmul_peak(shapes=SHAPES, repeats: int = 5, calls: int = 20) -> float:
    """fp32 FLOP/s of one thread: the best rate of `repeats` runs of `calls` matmuls of each shape, in CPU time."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    rates = []
    try:
        for m, k, n in shapes:
            a, b = torch.randn(m, k), torch.randn(k, n)
            a @ b  # the first call allocates
            for _ in range(repeats):
                start = time.process_time()
                for _ in range(calls):
                    a @ b
                rates.append(2 * m * k * n * calls / (time.process_time() - start))
    finally:
        torch.set_num_threads(threads)
    return max(rates)


def floor(run: dict, peak: float, cores: int) -> dict:
    """The floor of `run` (a run.json's record) at `peak` FLOP/s per core over `cores`: seconds per notebook and in
    all, against the notebook's and the run's wall seconds."""
    ledger, walls = run["ledger"], run.get("seconds_per_notebook", {})
    notebooks = {}
    for name, record in sorted(ledger["notebooks"].items()):
        floor_seconds = record["flops"] / peak / cores
        per_copy = record["copy_seconds"] / record["computed"] if record["computed"] else None
        copy_floor = record["flops"] / record["computed"] / peak if record["computed"] else None
        notebooks[name] = {
            "computed": record["computed"],
            "read_back": record["read_back"],
            "flops": record["flops"],
            "floor_seconds": floor_seconds,
            "wall_seconds": walls.get(name),
            "seconds_per_copy": per_copy,
            "floor_seconds_per_copy": copy_floor,
            "per_copy_over_floor": per_copy / copy_floor if per_copy and copy_floor else None,
        }
    total = sum(n["flops"] for n in notebooks.values()) / peak / cores
    wall = run.get("wall_seconds")
    return {
        "peak_flops_per_core": peak,
        "cores": cores,
        "flops": sum(n["flops"] for n in notebooks.values()),
        "computed": sum(n["computed"] for n in notebooks.values()),
        "read_back": sum(n["read_back"] for n in notebooks.values()),
        "duplicates": ledger["duplicates"],
        "floor_seconds": total,
        "wall_seconds": wall,
        "wall_over_floor": wall / total if wall and total else None,
        "notebooks": notebooks,
    }


def latest_run_json() -> Path:
    """The run.json written last: the published run's or one under runs/."""
    found = [paths.PUBLISHED_NOTEBOOKS / "run.json", *paths.RUNS.glob("*/notebooks/run.json")]
    found = [path for path in found if path.exists() and "ledger" in json.loads(path.read_text())]
    if not found:
        raise SystemExit("no run.json with a copy ledger: run `make figures` (python -m helpers.run) first")
    return max(found, key=lambda path: path.stat().st_mtime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-json", type=Path, help="the run to compare (default: latest_run_json)")
    args = parser.parse_args()
    source = args.run_json or latest_run_json()
    run = json.loads(source.read_text())
    peak = matmul_peak()
    result = floor(run, peak, len(os.sched_getaffinity(0)))
    result["run_json"] = paths.shown(source)
    out = paths.BENCH_OUT / "figures.json"
    record = json.loads(out.read_text()) if out.exists() else {}
    record.update(run_floor=result, wall_over_floor=result["wall_over_floor"])
    paths.BENCH_OUT.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2))
    for line in report_lines(result):
        print(line)
    print(f"wrote {out}")


def report_lines(result: dict) -> list[str]:
    """The floor's table: per notebook, then the run against its floor."""
    lines = [
        f"floor of {result['run_json']}: {result['flops'] / 1e12:.1f} TFLOP of copies at "
        f"{result['peak_flops_per_core'] / 1e9:.0f} GFLOP/s per core x {result['cores']} cores; "
        f"{result['computed']:,} copies computed, {result['read_back']:,} read back, "
        f"{result['duplicates']:,} duplicates"
    ]
    for name, n in result["notebooks"].items():
        wall = "" if n["wall_seconds"] is None else f"{n['wall_seconds']:>7.0f} s wall vs "
        per_copy = (
            f"; per copy {1e3 * n['seconds_per_copy']:.2f} vs {1e3 * n['floor_seconds_per_copy']:.2f} ms"
            f" = {n['per_copy_over_floor']:.2f}x"
            if n["per_copy_over_floor"]
            else ""
        )
        lines.append(f"    {name:<16}{wall}{n['floor_seconds']:>7.0f} s floor{per_copy}")
    if result["wall_over_floor"] is None:
        lines.append("make figures: no computed copies or no wall time in this run.json")
    else:
        lines.append(
            f"make figures: {result['wall_seconds'] / 60:.1f} min against a floor of "
            f"{result['floor_seconds'] / 60:.1f} min = {result['wall_over_floor']:.2f}x (target <= {TARGET}x)"
        )
    return lines


if __name__ == "__main__":
    main()
