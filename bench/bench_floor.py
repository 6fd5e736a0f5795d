"""`make figures` against its floor, and where each notebook's time went outside the engine's calls.

    python -m bench.bench_floor [--run-json PATH]

The run is the published one (paper_figures/notebooks/run.json) unless given. Its floor is the time its copies'
matmuls (run.json's `ledger`, helpers/runner/ledger.py) take at the fp32 matmul peak of one core, spread over every
core: what no code could beat. The runner measures the peak where the run ran, at its start and end, and writes the
floor into run.json (`floor`, helpers/runner/floor.py); this prints that, and beside it the same ledger at the peak
measured here (a run.json without `floor` only the latter). Per notebook: its wall seconds against its floor and
the CPU seconds per computed copy against one copy's FLOPs at the peak of one core.

Where run.json has `times` (helpers/storage/timers.py), per notebook its CPU seconds in the engine's calls, the
items and batches, the cache and the rest; and its wall projected from its copies: the calls' CPU seconds
replaced by bench_figures' NCS call (per copy against its floor, times the notebook's FLOPs; fixed per call, times
its calls; both at the run's peak), the rest of its CPU as measured, over the CPU seconds per wall second the
notebook ran at. The projection is checked against the run's wall within PROJECTION_TOLERANCE.

Prints the tables and adds `run_floor`, `wall_over_floor` and `projection_of_run` to build/bench/figures.json
(bench_figures writes the rest).
"""

import argparse
import json
import os
from pathlib import Path

from helpers.runner.floor import floor, matmul_peak
from helpers.storage import paths

TARGET = 1.3  # make figures at most this times its floor (issue 57)
PROJECTION_TOLERANCE = 0.15  # a notebook's projected wall within this of the published run's (issue 67)
GROUPS = {  # the breakdown's columns: helpers.storage.timers' parts
    "calls": ("forward", "hashing"),
    "items": ("items", "vision"),
    "cache": ("cache_read", "cache_write"),
    "rest": ("rest",),
}


def projection(run: dict, call: dict, peak: float) -> dict:
    """Per notebook with `times`: its CPU seconds per group (GROUPS), the calls' CPU projected from `call`
    (bench_figures' NCS call on this machine: per_copy_over_floor, fixed_seconds at peak_flops) at the run's `peak`,
    and its wall projected from them against the run's."""
    out = {}
    for name, times in sorted(run.get("times", {}).get("notebooks", {}).items()):
        record, wall = run["ledger"]["notebooks"].get(name), times["wall"]
        if record is None or not wall or not times["cpu"]:
            continue
        cpu = {group: sum(times["cpu_parts"][part] for part in parts) for group, parts in GROUPS.items()}
        calls = call["per_copy_over_floor"] * record["flops"] / peak
        calls += record["calls"] * call["fixed_seconds"] * call["peak_flops"] / peak
        projected_cpu = times["cpu"] - cpu["calls"] + calls
        projected_wall = projected_cpu * wall / times["cpu"]  # at the CPU seconds per wall second it ran at
        out[name] = {
            "cpu_seconds": times["cpu"],
            "cpu_seconds_per_group": cpu,
            "projected_call_seconds": calls,
            "wall_seconds": wall,
            "projected_wall_seconds": projected_wall,
            "within_tolerance": abs(projected_wall / wall - 1) <= PROJECTION_TOLERANCE,
        }
    return out


def ncs_call(figures: dict) -> dict | None:
    """bench_figures' NCS call (figures.json) as `projection` takes it, or None before bench_figures has run."""
    if "cuts" not in figures:
        return None
    cuts, floor_ = figures["cuts"], figures["floor"]
    return {
        "per_copy_over_floor": cuts["ncs"]["per_copy_seconds"] / floor_["floor_seconds_per_copy"],
        "fixed_seconds": cuts["fixed_seconds_per_call"],
        "peak_flops": floor_["peak_flops"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default = paths.PUBLISHED_NOTEBOOKS / "run.json"
    parser.add_argument("--run-json", type=Path, default=default, help=f"the run (default: {paths.shown(default)})")
    args = parser.parse_args()
    if not args.run_json.exists() or "ledger" not in json.loads(args.run_json.read_text()):
        raise SystemExit(f"{args.run_json}: no run.json with a copy ledger; run `make figures` or give --run-json")
    run = json.loads(args.run_json.read_text())
    here = floor(run, matmul_peak(), len(os.sched_getaffinity(0)))
    here["run_json"] = paths.shown(args.run_json)
    where_it_ran = run.get("floor")
    out = paths.BENCH_OUT / "figures.json"
    figures = json.loads(out.read_text()) if out.exists() else {}
    call = ncs_call(figures)
    run_peak = where_it_ran["peak_flops_per_core"] if where_it_ran else here["peak_flops_per_core"]
    projected = projection(run, call, run_peak) if call else {}
    figures.update(
        run_floor=where_it_ran or here,
        run_floor_at_this_peak=here,
        wall_over_floor=(where_it_ran or here)["wall_over_floor"],
        projection_of_run=projected,
    )
    paths.BENCH_OUT.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=2))
    if where_it_ran:
        print(f"where it ran (peaks at start and end {_giga(where_it_ran['peaks_at_start_and_end'])} GFLOP/s):")
        print("\n".join(report_lines(where_it_ran, here["run_json"])))
    else:
        print(f"{here['run_json']} has no floor measured where it ran (only full runs measure it)")
    print(f"at the peak measured here ({here['peak_flops_per_core'] / 1e9:.0f} GFLOP/s per core):")
    print("\n".join(report_lines(here, here["run_json"])))
    print("\n".join(projection_lines(projected, run, call)))
    print(f"wrote {out}")


def _giga(peaks: list[float]) -> str:
    return " / ".join(f"{peak / 1e9:.0f}" for peak in peaks)


def report_lines(result: dict, source: str) -> list[str]:
    """The floor's table: per notebook, then the run against its floor."""
    lines = [
        f"floor of {source}: {result['flops'] / 1e12:.1f} TFLOP of copies at "
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


def projection_lines(projected: dict, run: dict, call: dict | None) -> list[str]:
    """Per notebook: its CPU seconds per group and its projected wall against the run's."""
    if call is None:
        return ["no projection: build/bench/figures.json has no NCS call (run bench_figures first)"]
    if "times" not in run:
        return ["no projection: this run.json has no `times` (runs before helpers/storage/timers.py)"]
    lines = [
        f"CPU seconds per notebook ({', '.join(GROUPS)}); wall projected from its copies at the NCS call's "
        f"{call['per_copy_over_floor']:.2f}x its floor per copy and {1e3 * call['fixed_seconds']:.1f} ms per call:"
    ]
    for name, p in projected.items():
        groups = " ".join(f"{p['cpu_seconds_per_group'][g]:>7.0f}" for g in GROUPS)
        verdict = "ok" if p["within_tolerance"] else f"off by more than {PROJECTION_TOLERANCE:.0%}"
        ratio = p["projected_wall_seconds"] / p["wall_seconds"]
        lines.append(
            f"    {name:<16}{groups}  wall {p['wall_seconds']:>6.0f} s, projected "
            f"{p['projected_wall_seconds']:>6.0f} s ({ratio:.2f}x, {verdict})"
        )
    return lines


if __name__ == "__main__":
    main()
