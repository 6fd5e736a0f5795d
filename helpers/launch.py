"""Shards of a run on an existing engine, Ray or SLURM (submitit), then the run that assembles the tables.

    python -m helpers.launch local 03 04 05 --shards 2                              # 2 processes here
    python -m helpers.launch ray 03 04 05 --shards 2 -p cache_dir /tmp/shared      # local Ray, 2 tasks
    python -m helpers.launch ray 03 04 05 --shards 16 --address auto --gpus 1 -p device cuda \\
        -p model Qwen/Qwen3-VL-8B-Instruct -p dtype bfloat16 -p n_items 400 -p cache_dir /shared/cache
    python -m helpers.launch slurm 03 04 05 --shards 16 --partition gpu --gpus 1 --hours 4 \\
        -p device cuda -p model Qwen/Qwen3-VL-8B-Instruct -p n_items 400 -p cache_dir /shared/cache

Shard i is `python -m helpers.run <notebooks> <the -p overrides> --shard i/n --workers <cpus>`, run from
this repository (its folder and the cache folder must be reachable under the same paths where the
engine places the task: one machine, or a shared file system). Shards fill the cache (helpers/storage/workers.py)
and write their tables only into build/shards/. Once every shard has finished, the plain run of the same
notebooks and overrides assembles every table from the cache, here (`--no-assemble` skips it).
"""

import argparse
import os
import subprocess
import sys
import time

from helpers.runner.cli import add_parameter_option
from helpers.storage import paths

KERNEL_STAGGER_S = 2.0  # between two local shards' starts


def runner_command(notebooks: list[str], overrides: list[list[str]], out: str | None, *extra: str) -> list[str]:
    """`python -m helpers.run` of `notebooks` with the -p `overrides`, the run folder `out` and `extra` options."""
    options = [item for pair in overrides for item in ("-p", *pair)] + (["--out", out] if out else [])
    return [sys.executable, "-m", "helpers.run", *notebooks, *options, *extra]


def shard_commands(notebooks: list[str], count: int, overrides: list[list[str]], out: str | None, cpus: int):
    """The runner command of each of `count` shards."""
    return [
        runner_command(notebooks, overrides, out, "--shard", f"{i}/{count}", "--workers", str(cpus))
        for i in range(count)
    ]


def _environment() -> dict:
    """This process's environment with this repository's helpers first on the path."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(paths.ROOT), os.environ.get("PYTHONPATH")]))}


def run_command(command: list[str]) -> int:
    """Run one command from this repository; raise if it fails."""
    subprocess.run(command, cwd=paths.ROOT, env=_environment(), check=True)
    return 0


def on_processes(commands: list[list[str]]) -> None:
    """Every command at once as a process of this machine, each started KERNEL_STAGGER_S after the one before (two
    Jupyter kernels started in the same instant can be handed the same free TCP port); raise if one fails."""
    running = []
    for command in commands:
        if running:
            time.sleep(KERNEL_STAGGER_S)
        running.append(subprocess.Popen(command, cwd=paths.ROOT, env=_environment()))
    failed = [" ".join(command) for command, process in zip(commands, running) if process.wait() != 0]
    if failed:
        raise RuntimeError(f"shard(s) failed: {failed}")


def on_ray(commands: list[list[str]], address: str | None = None, gpus: float = 0, cpus: int = 1) -> None:
    """One Ray task per command (`address` None: a local Ray started here; "auto" or "ray://...": a cluster)."""
    import ray

    if address:
        ray.init(address=address)
    else:
        ray.init(include_dashboard=False)  # a local Ray needs no dashboard
    try:
        task = ray.remote(num_cpus=cpus, num_gpus=gpus)(run_command)
        ray.get([task.remote(command) for command in commands])
    finally:
        ray.shutdown()


def on_slurm(commands: list[list[str]], partition: str | None, gpus: int = 1, cpus: int = 1, hours: float = 4) -> None:
    """One SLURM array task per command (submitit); returns once all have finished, raising a task's error."""
    import submitit

    executor = submitit.AutoExecutor(folder=paths.BUILD / "slurm" / "%j")
    executor.update_parameters(
        slurm_partition=partition,
        gpus_per_node=gpus,
        cpus_per_task=cpus,
        timeout_min=int(60 * hours),
        slurm_array_parallelism=len(commands),
    )
    jobs = executor.map_array(run_command, commands)
    print(f"submitted SLURM array {jobs[0].job_id.split('_')[0]} of {len(jobs)} shards", flush=True)
    for job in jobs:
        job.result()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("engine", choices=("local", "ray", "slurm"))
    parser.add_argument("notebooks", nargs="*", help="prefixes of notebooks to run (default: all)")
    parser.add_argument("--shards", type=int, required=True)
    add_parameter_option(parser, "parameter override, passed as given to every shard and the assembling run")
    parser.add_argument("--out", help="the run folder (as the runner's --out)")
    parser.add_argument("--cpus", type=int, default=1, help="CPU cores (= workers) per shard")
    parser.add_argument("--gpus", type=float, default=0, help="GPUs per shard")
    parser.add_argument("--address", help="Ray cluster address (default: a local Ray)")
    parser.add_argument("--partition", help="SLURM partition")
    parser.add_argument("--hours", type=float, default=4, help="SLURM time limit per shard")
    parser.add_argument("--no-assemble", action="store_true", help="only the shards, not the assembling run")
    args = parser.parse_args(argv)
    if args.shards < 1:
        raise SystemExit(f"--shards {args.shards} must be >= 1")
    out = os.path.abspath(args.out) if args.out else None
    commands = shard_commands(args.notebooks, args.shards, args.p, out, args.cpus)
    if args.engine == "local":
        on_processes(commands)
    elif args.engine == "ray":
        on_ray(commands, args.address, args.gpus, args.cpus)
    else:
        on_slurm(commands, args.partition, int(args.gpus), args.cpus, args.hours)
    if not args.no_assemble:
        run_command(runner_command(args.notebooks, args.p, out))


if __name__ == "__main__":
    main()
