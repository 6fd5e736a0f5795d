"""Execute the numbered notebooks with papermill, into one run folder: in order, two side by side on the CPU.

    python -m helpers.run                      # the default full run: publishes paper_figures/ and data/
    python -m helpers.run 01 -p n_strips 40    # any other run: runs/<model>-<hash>/ (git-ignored)
    python -m helpers.run 03 04 -p model /path/to/model -p device cuda
    python -m helpers.run --smoke              # small sizes, into build/smoke/
    python -m helpers.run 04 --out my_run      # an explicit run folder
    python -m helpers.run --workers 4          # 4 processes compute each run's chunks (default: the cores)
    python -m helpers.run --jobs 1             # one notebook at a time (default: 2 on the CPU, 1 on a GPU)
    python -m helpers.run 04 --shard 0/8 -p cache_dir /shared/cache   # one of 8 shards: chunks only

Only the default configuration (the embedded toy, every notebook, no parameter changed) writes into
paper_figures/ and data/. Each notebook (`notebooks/NN_name.py`, a jupytext percent source) is executed
with kernel `python3` in `notebooks/`; its executed copy (.ipynb, with every output and figure, and an
.html rendering) lands in the run's notebooks/ folder beside `run.json` (parameters, versions, the
model's fingerprint, the time each notebook took). Before any notebook starts, the files each reads from
earlier notebooks must exist or be made earlier in the run (helpers/runner/steps.py); the first failure stops the
run and names the cell.
With two jobs a notebook starts once the notebooks it reads from are done (06 beside 00-02, 03 beside 04):
each one's chunk workers take the cores the other leaves idle while it starts a kernel, imports, compiles
or makes its tables, and the cells' output is not echoed (it is in the executed notebooks).

`--shard i/n` runs the notebooks as shard i of n (helpers/storage/workers.py): it fills the cache folder with its
share of every run's chunks (and any chunk no other process holds) and writes its tables and notebooks
into build/shards/, never into a run folder; a plain run afterwards with the same cache assembles them.
"""

import argparse
import json
import logging
import os
import platform
import shutil
import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from helpers.engine.devices import resolve_device
from helpers.runner import floor, ledger, progress
from helpers.runner.cli import add_parameter_option, check_option, parameter_overrides, parse_value
from helpers.runner.params import ParameterError, check_renamed, check_run, declared_in
from helpers.runner.steps import STEPS, producer, waits_for
from helpers.storage import cache, paths, runs, timers, workers


def notebook_sources() -> list[Path]:
    """The numbered notebook sources, in order."""
    return sorted(p for p in paths.NOTEBOOKS.glob("[0-9][0-9]_*.py"))


def select(names: list[str]) -> list[Path]:
    """Notebooks whose file stem starts with one of `names` ('01', '01_discovery'); all when empty."""
    sources = notebook_sources()
    if not names:
        return sources
    chosen = []
    for name in names:
        hits = [p for p in sources if p.stem.startswith(name)]
        if not hits:
            raise SystemExit(f"no notebook matches {name!r}; available: {', '.join(p.stem for p in sources)}")
        chosen += [p for p in hits if p not in chosen]
    return sorted(chosen)


def to_ipynb(source: Path, target: Path) -> Path:
    import jupytext

    target.parent.mkdir(parents=True, exist_ok=True)
    jupytext.write(jupytext.read(source), target)
    return target


def check_inputs(source: Path, folders: runs.RunFolders, earlier: list[str]) -> None:
    """Stop before `source` starts when a file it reads (data_reads in the data folder, out_reads in the run
    folder) is neither on disk nor made earlier in this run."""
    step = STEPS.get(source.stem)
    if step is None:
        return
    earlier_steps = [STEPS[name] for name in earlier if name in STEPS]
    made_data = {f for s in earlier_steps for f in s.data_writes}
    made_out = {f for s in earlier_steps for f in s.output_files()}
    missing = [(f, folders.data) for f in step.data_reads if f not in made_data and not (folders.data / f).exists()]
    missing += [(f, folders.out) for f in step.out_reads if f not in made_out and not (folders.out / f).exists()]
    if missing:
        (name, folder), first = missing[0], producer(missing[0][0])
        raise SystemExit(
            f"{source.stem} reads {len(missing)} file(s) that {folder} does not hold, e.g. {name}: "
            f"run {first} first with the same parameters (python -m helpers.run {first[:2]} ...), "
            "or run both in one call"
        )


def _planned(source: Path, declared: dict, params: dict) -> int:
    """About how many item x head-set copies `source` runs at these parameters (cached chunks are not subtracted);
    0 where not projected (a smoke run, a notebook without a projection)."""
    step = STEPS.get(source.stem)
    if step is None or params.get("smoke"):
        return 0
    values = {name: params.get(name, info["default"]) for name, info in declared.items()}
    values = {name: parse_value(v) if isinstance(v, str) else v for name, v in values.items()}
    return step.planned_forwards(values)


def _plan(count: int) -> str:
    """', about N forward passes' for a notebook's planned copies (_planned), or ''."""
    return f"; about {count:,} forward passes (item x head-set copies; cached ones are read back)" if count else ""


def _write_executed(executed: Path, notebooks_dir: Path, published: bool = False) -> None:
    """Move the executed notebook into the run folder and render it as HTML beside it (both atomically).

    A published copy names no machine's paths: papermill's record of its files and folders is made
    repository-relative, and its injected folder parameters become a comment, so that rerunning it in
    JupyterLab writes into the default run's scratch folder (runs/toy-default/), never into paper_figures/."""
    import nbformat
    from nbconvert import HTMLExporter

    notebooks_dir.mkdir(parents=True, exist_ok=True)
    notebook = nbformat.read(executed, as_version=4)
    if published:
        _unpin_folders(notebook)
        nbformat.write(notebook, executed)
    html, _ = HTMLExporter().from_notebook_node(notebook)
    tmp_html = notebooks_dir / f".{executed.stem}.html.tmp"
    tmp_html.write_text(html)
    executed.replace(notebooks_dir / executed.name)
    tmp_html.replace(notebooks_dir / f"{executed.stem}.html")


def _unpin_folders(notebook) -> None:
    """The published run's folder parameters, repository-relative, in papermill's record and as a comment in
    the injected-parameters cell (the only parameters the default run injects)."""
    record = notebook.metadata.get("papermill", {})
    for key in ("input_path", "output_path"):
        if record.get(key):
            record[key] = paths.shown(record[key])
    given = record.get("parameters", {})
    for name in runs.DIR_PARAMETERS:
        if given.get(name):
            given[name] = paths.shown(given[name])
    for cell in notebook.cells:
        if "injected-parameters" in cell.metadata.get("tags", []):
            lines = [f"#   {name} = {value!r}" for name, value in given.items()]
            cell.source = "\n".join(
                ["# The published run (python -m helpers.run) wrote with these folders, relative to the repository:"]
                + lines
                + ["# Rerun here, this notebook writes into the default run's own folder (runs/toy-default/) instead."]
            )


def run(
    sources: list[Path],
    overrides: dict,
    build_dir: Path,
    folders: runs.RunFolders | None = None,
    defaults: dict | None = None,
    jobs: int = 1,
) -> dict:
    """Execute `sources`, up to `jobs` notebooks at once in the order their reads allow (_schedule; one job: in
    order). `overrides` (the user's -p) must each be declared by some selected notebook; they and `defaults` go
    to the notebooks that declare them. Returns the seconds each notebook took."""
    try:
        check_renamed(overrides)
    except ParameterError as error:
        raise SystemExit(str(error)) from None
    declared_names = {name for src in sources for name in declared_in(src)}
    unused = sorted(set(overrides) - declared_names)
    if unused:  # before papermill's and torch's imports, like every refusal of the runner
        raise SystemExit(
            f"parameter(s) {unused} are taken by none of the selected notebooks; known: {sorted(declared_names)}"
        )
    for src in sources:  # every parameter checked before any notebook (or model) starts
        try:
            check_run(src, {**(defaults or {}), **overrides})
        except ParameterError as error:
            raise SystemExit(f"{src.stem}: {error}") from None
    import papermill  # after the checks: a refusal comes without papermill's and Jupyter's imports
    from papermill.exceptions import PapermillExecutionError

    inputs = {src: to_ipynb(src, build_dir / "source" / f"{src.stem}.ipynb") for src in sources}
    declared = {src: papermill.inspect_notebook(str(nb)) for src, nb in inputs.items()}
    given = {**(defaults or {}), **overrides}
    if folders is not None:
        given.update(out_dir=str(folders.out), data_dir=str(folders.data))
        for i, src in enumerate(inputs):
            check_inputs(src, folders, [s.stem for s in list(inputs)[:i]])
    notebooks_dir = folders.notebooks if folders is not None else build_dir / "notebooks"
    work_dir = build_dir / "executing"
    work_dir.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(ledger_folder(build_dir), ignore_errors=True)  # this call's ledger only
    order = {src: i for i, src in enumerate(inputs, 1)}
    timings = {}

    def execute(src: Path) -> None:
        params = {k: v for k, v in given.items() if k in declared[src]}
        executed = work_dir / f"{src.stem}.ipynb"
        planned = _planned(src, declared[src], params)
        print(f"[{order[src]}/{len(inputs)}] {src.stem} {params}{_plan(planned)}", flush=True)
        start = time.time()
        ledger.write_planned(ledger_folder(build_dir), src.stem, planned)
        try:
            with progress.showing_progress(ledger_folder(build_dir), src.stem, planned, workers.worker_count()):
                papermill.execute_notebook(
                    str(inputs[src]),
                    str(executed),
                    parameters=params,
                    kernel_name="python3",
                    cwd=str(paths.NOTEBOOKS),
                    progress_bar=False,
                    log_output=jobs == 1,  # the cells' output of notebooks running side by side would interleave
                    kernel_manager_class=ledger.kernel_manager(ledger_folder(build_dir), src.stem),
                )
        except PapermillExecutionError as err:
            _write_executed(executed, notebooks_dir, folders == runs.PUBLISHED)
            raise SystemExit(
                f"FAILED {src.stem}: cell {err.cell_index} (execution count {err.exec_count}): "
                f"{err.ename}: {err.evalue}\nexecuted copy: {notebooks_dir / executed.name}"
            ) from None
        timings[src.stem] = round(time.time() - start, 1)
        _write_executed(executed, notebooks_dir, folders == runs.PUBLISHED)
        print(f"      {src.stem} done in {timings[src.stem]:.0f} s -> {notebooks_dir / executed.name}", flush=True)

    _schedule(list(inputs), execute, jobs)
    return timings


def ledger_folder(build_dir: Path) -> Path:
    """Where the notebooks' processes write the copy ledger's lines (helpers.storage.ledger)."""
    return build_dir / "ledger"


def _schedule(sources: list[Path], execute, jobs: int) -> None:
    """execute(source) for every source: with one job in order, in this thread; with several, in threads, up to
    `jobs` at once, each once the notebooks it waits for are done (steps.waits_for), a notebook more others wait
    for (transitively) first, then the numbering. After a failure no further notebook starts; the running ones
    finish, then the first failure is raised."""
    if jobs == 1:
        for src in sources:
            execute(src)
        return
    waits = waits_for([src.stem for src in sources])

    def waiting_on(stem: str) -> int:  # how many notebooks wait for `stem`, directly or through others
        return sum(stem in _upstream(other, waits) for other in waits)

    pending = sorted(sources, key=lambda src: (-waiting_on(src.stem), sources.index(src)))
    done, running, failure = set(), {}, None
    with ThreadPoolExecutor(max_workers=jobs) as pool, _exit_on_interrupt():
        while running or (pending and failure is None):
            ready = [src for src in pending if waits[src.stem] <= done]
            while failure is None and ready and len(running) < jobs:
                src = ready.pop(0)
                pending.remove(src)
                running[pool.submit(execute, src)] = src
            if not running:
                raise RuntimeError(
                    f"notebooks {[src.stem for src in pending]} wait for each other (helpers/runner/steps.py)"
                )
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                src = running.pop(future)
                try:
                    future.result()
                    done.add(src.stem)
                except BaseException as error:  # SystemExit from a failed notebook, or anything else
                    failure = failure or error
    if failure is not None:
        raise failure


@contextmanager
def _exit_on_interrupt():
    """Ctrl-C ends the runner at once: the notebooks run in threads, which a KeyboardInterrupt does not stop and
    which the interpreter would wait for; their kernels exit with the runner (ipykernel watches its parent)."""
    try:
        yield
    except KeyboardInterrupt:
        print("interrupted: stopping the running notebooks", file=sys.stderr, flush=True)
        os._exit(130)


def _upstream(stem: str, waits: dict[str, set[str]]) -> set[str]:
    """The notebooks `stem` waits for, directly or through others."""
    found, todo = set(), list(waits[stem])
    while todo:
        other = todo.pop()
        if other not in found:
            found.add(other)
            todo.extend(waits[other])
    return found


def _versions() -> dict:
    import torch
    import transformers

    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=paths.ROOT, capture_output=True, text=True).stdout
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "git_commit": commit.strip() or None,
    }


def write_run_json(
    folders: runs.RunFolders,
    parameters: dict,
    timings: dict,
    how: dict | None = None,
    copies: dict | None = None,
    times: dict | None = None,
    peaks: tuple[float, float] | None = None,
) -> Path:
    """run.json: the run's parameters, versions, the model's fingerprint, the seconds per notebook (merged with
    those of earlier calls into the same folder; notebooks run side by side overlap), `how` the last call ran
    (jobs, wall_seconds) and `copies`, the copy ledger (helpers.runner.ledger.collect) under `ledger`: its
    notebooks merged with those of earlier calls, its totals and duplicates the last call's. `times`: where each
    notebook's time went (helpers.storage.timers.collect_times), merged the same way. `peaks`: the matmul peak per core
    measured at the start and the end of a full run, for its `floor` (helpers.runner.floor)."""
    model = parameters.get("model", "toy")
    record = {
        "parameters": parameters,
        "model": model,
        "model_fingerprint": model_fingerprint_of(model),
        "versions": _versions(),
        "seconds_per_notebook": timings,
        **(how or {}),
    }
    previous = json.loads(folders.run_json.read_text()) if folders.run_json.exists() else {}
    record["seconds_per_notebook"] = {**previous.get("seconds_per_notebook", {}), **timings}
    if copies is not None:
        notebooks = {**previous.get("ledger", {}).get("notebooks", {}), **copies["notebooks"]}
        record["ledger"] = {**copies, "notebooks": notebooks}
    if times is not None:
        notebooks = {**previous.get("times", {}).get("notebooks", {}), **times["notebooks"]}
        record["times"] = {**times, "notebooks": notebooks}
    if peaks is not None and copies is not None:
        record["floor"] = floor.measured_floor(record, peaks, len(os.sched_getaffinity(0)))
    folders.run_json.parent.mkdir(parents=True, exist_ok=True)
    tmp = folders.run_json.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=1, default=str) + "\n")
    tmp.replace(folders.run_json)
    return folders.run_json


def model_fingerprint_of(model: str) -> str:
    """The model's weights fingerprint, computed from its name or folder without loading it."""
    from types import SimpleNamespace

    from helpers.engine.model_files import model_fingerprint

    return model_fingerprint(SimpleNamespace(name=model))


def shard_folders(target: runs.RunFolders, shard: str) -> runs.RunFolders:
    """A scratch run folder for one shard, its data/ a copy of the target run's (the head-sets 03-05 read)."""
    folders = runs.in_folder(paths.BUILD / "shards" / f"{target.out.name}-{shard.replace('/', '-of-')}")
    if target.data.exists():
        shutil.copytree(target.data, folders.data, dirs_exist_ok=True)
    return folders


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", help="prefixes of notebooks to run (default: all)")
    add_parameter_option(parser, "parameter override, as papermill's -p")
    parser.add_argument("--smoke", action="store_true", help="small sizes; into build/smoke/")
    parser.add_argument(
        "--out", help="the run folder (default: paper_figures/ for the default full run, else runs/<model>-<hash>/)"
    )
    parser.add_argument("--workers", type=int, help="processes per run's chunks (default: the cores available)")
    parser.add_argument("--shard", help="i/n: compute shard i of n of every run's chunks into the cache; no tables")
    parser.add_argument(
        "--jobs",
        type=int,
        help="notebooks run side by side once what they read is written (default: 2 on the CPU, 1 on an accelerator)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.workers is not None:
        os.environ[workers.WORKERS_ENV] = str(args.workers)  # the notebooks' kernels inherit it
    os.environ.setdefault(cache.PROGRESS_ENV, "0")  # chunk progress bars would stay in the executed copies
    if args.shard is not None:
        os.environ[workers.SHARD_ENV] = args.shard
        workers.shard()  # a malformed i/n stops here
    overrides = parameter_overrides(args.p)
    jobs = args.jobs if args.jobs is not None else default_jobs(overrides)
    if jobs < 1:
        raise SystemExit(f"--jobs {jobs}: must be a whole number >= 1")
    if jobs > 1:
        # one thread per process: two notebooks' multi-threaded phases at once leave each OpenMP thread waiting
        # for a sibling that the other notebook holds off its core (a smoke run took 10x as long)
        os.environ.setdefault("OMP_NUM_THREADS", "1")
    sources = select(args.notebooks)
    defaults = {"smoke": True} if args.smoke else {}
    changed = {**defaults, **overrides}
    folders = chosen_run_folders(args, sources, overrides, changed)
    if args.shard is not None:
        folders = shard_folders(folders, args.shard)
    print(f"run folder: {folders.out} (data {folders.data}, executed notebooks {folders.notebooks})", flush=True)
    build_dir = paths.BUILD / "runner" / folders.out.name
    full = args.shard is None and len(sources) == len(notebook_sources())  # its floor is measured where it runs
    peak_at_start = floor.matmul_peak() if full else None
    start = time.time()
    timings = run(sources, overrides, build_dir, folders, defaults, jobs)
    wall = round(time.time() - start, 1)
    peaks = (peak_at_start, floor.matmul_peak()) if full else None
    copies = ledger.collect(ledger_folder(build_dir))
    times = timers.collect_times(ledger_folder(build_dir), timings)
    write_run_json(folders, changed, timings, {"jobs": jobs, "wall_seconds": wall}, copies, times, peaks)
    declared = {f for src in sources if src.stem in STEPS for f in STEPS[src.stem].output_files()}
    if args.shard is None and "INDEX.md" in declared:
        from helpers.runner import artefacts  # 07 wrote the index; notebooks beside it may have finished after

        artefacts.write_index(folders.out)
    if args.shard is None and "claims.csv" in declared:
        from helpers.studies import claims  # claims on tables of notebooks that ran after 05 (06's Table 19)

        rewritten = claims.rewrite_after_run(folders.out)
        if rewritten is not None:
            print(f"claims and {rewritten.name} rewritten from the run's final tables", flush=True)
    print(f"total {wall:.0f} s of wall time ({jobs} job(s)); {folders.run_json}", flush=True)
    print(f"copies ({ledger.COPY}), per notebook:", flush=True)
    print("\n".join(ledger.summary_lines(copies, timings)), flush=True)
    if peaks is not None:
        record = json.loads(folders.run_json.read_text())["floor"]
        print(
            f"floor {record['floor_seconds']:.0f} s at {max(peaks) / 1e9:.0f} GFLOP/s per core (start "
            f"{peaks[0] / 1e9:.0f}, end {peaks[1] / 1e9:.0f}) x {record['cores']} cores: wall / floor "
            f"{record['wall_over_floor'] or float('nan'):.2f}x",
            flush=True,
        )


def chosen_run_folders(args, sources: list[Path], overrides: dict, changed: dict) -> runs.RunFolders:
    """Where the run writes: `--out` or `-p out_dir` (the same folder; both given must agree), else build/smoke/
    for a smoke run, paper_figures/ for the default full run, runs/<model>-<hash>/ for any other; `-p data_dir`
    then replaces the data folder."""
    if args.out is not None:  # checked as -p out_dir is, before anything starts
        check_option("--out", "out_dir", args.out)
    out = {Path(v).expanduser().resolve() for v in (args.out, overrides.get("out_dir")) if v is not None}
    if len(out) > 1:
        raise SystemExit(f"--out {args.out} and -p out_dir {overrides['out_dir']} name two run folders; give one")
    if out:
        folders = runs.in_folder(out.pop())
    elif args.smoke:
        folders = runs.in_folder(paths.BUILD / "smoke")
    else:
        model = overrides.get("model", "toy")
        full_default = len(sources) == len(notebook_sources()) and runs.is_default(model, changed)
        folders = runs.folders_for(model, changed, publish=full_default)
    if overrides.get("data_dir") is not None:
        folders = replace(folders, data=Path(overrides["data_dir"]))
    return folders


def default_jobs(overrides: dict) -> int:
    """Two notebooks side by side on the CPU (each one's chunk workers fill the cores the other leaves idle while
    it starts, compiles or makes its tables); one on an accelerator, where two would each hold the model. The
    device is the one "auto" resolves to here."""
    device = overrides.get("device", "cpu")
    return 2 if (resolve_device(device) if device == "auto" else device) == "cpu" else 1


if __name__ == "__main__":
    main()
