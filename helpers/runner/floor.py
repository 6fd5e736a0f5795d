"""A run against its floor: its copies' matmul FLOPs at the fp32 matmul peak of the machine that ran it.

The runner measures the peak of one core (`matmul_peak`) at the start and the end of every full run and writes
`floor(run.json's record, the faster of the two, the cores)` into run.json as `floor`: seconds per notebook and in
all that no code could beat on that machine, against the wall seconds, and per computed copy its CPU seconds
against one copy's FLOPs at the peak of one core (bench/bench_floor.py reads it).
"""

import time

DECIDES_RESULTS = False  # measures the machine, never changes a result (helpers.storage.code_hash)
# [m, k] x [k, n] matmuls whose best rate is the peak: 21 copies of a 150-row toy item through its MLP
# ([T * 21, D] x [D, F], bench_figures' floor), and a large square one
MATMUL_SHAPES = ((21 * 150, 128, 256), (1024, 1024, 1024))


def matmul_peak(shapes=MATMUL_SHAPES, repeats: int = 5, calls: int = 20) -> float:
    """fp32 FLOP/s of one thread: the best rate of `repeats` runs of `calls` matmuls of each shape, in CPU time."""
    import torch

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
            "calls": record["calls"],
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


def measured_floor(run: dict, peaks: tuple[float, float], cores: int) -> dict:
    """run.json's `floor`: `floor` at the faster of the peaks measured at the run's start and end (`peaks`)."""
    return {"peaks_at_start_and_end": list(peaks), **floor(run, max(peaks), cores)}
