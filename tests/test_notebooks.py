"""Notebook structure, the runner, and a smoke papermill run of every notebook."""

import ast
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import jupytext
import nbformat
import pytest

from helpers import run
from helpers.runner.steps import STEPS, waits_for
from helpers.storage import paths

SOURCES = run.notebook_sources()


def test_notebooks_exist_in_order():
    stems = [p.stem for p in SOURCES]
    assert stems and stems[0] == "00_design"
    numbers = [int(s[:2]) for s in stems]
    assert numbers == sorted(set(numbers)), "two notebooks share a number"  # 06 may land after 07


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_one_parameters_cell_of_plain_literals_and_a_kernelspec(source):
    nb = jupytext.read(source)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{source.name}: {len(tagged)} parameters cells"
    first_code = next(c for c in nb.cells if c.cell_type == "code")
    assert first_code is tagged[0], "the parameters cell must be the first code cell"
    for stmt in ast.parse(tagged[0].source).body:
        assert isinstance(stmt, ast.Assign), ast.dump(stmt)
        ast.literal_eval(stmt.value)  # raises unless a plain literal
    names = {t.id for s in ast.parse(tagged[0].source).body for t in s.targets}
    assert {"smoke", "out_dir", "cache_dir"} <= names and ("model" in names or "models" in names)  # 06: models


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_py_source_is_in_canonical_jupytext_form(source):
    # the .ipynb twin is generated from the .py; a round trip must not change the source
    text = source.read_text()
    assert jupytext.writes(jupytext.reads(text, fmt="py:percent"), fmt="py:percent") == text


@pytest.mark.notebooks
def test_runner_names_failing_notebook_and_cell(tmp_path):
    bad = tmp_path / "99_bad.py"
    header = (
        "# ---\n# jupyter:\n#   kernelspec:\n#     display_name: Python 3\n#     language: python\n"
        "#     name: python3\n# ---\n\n"
    )
    bad.write_text(header + '# %% tags=["parameters"]\nx = 1\n\n# %%\ny = x + 1\n\n# %%\nraise ValueError("boom")\n')
    with pytest.raises(SystemExit) as err:
        run.run([bad], {"x": 2}, tmp_path / "build")
    assert "FAILED 99_bad" in str(err.value) and "ValueError: boom" in str(err.value)
    executed = json.loads((tmp_path / "build" / "notebooks" / "99_bad.ipynb").read_text())
    injected = [c for c in executed["cells"] if "injected-parameters" in c["metadata"].get("tags", [])]
    assert "x = 2" in "".join(injected[0]["source"])
    with pytest.raises(SystemExit, match="taken by none"):
        run.run([bad], {"nope": 1}, tmp_path / "build")


def _scheduled(jobs: int, fail: str = ""):
    """run._schedule over every notebook with a stand-in for papermill: the start and end events, in order."""
    events, lock = [], threading.Lock()

    def execute(src):
        with lock:
            events.append(("start", src.stem))
        time.sleep(0.05)
        with lock:
            events.append(("end", src.stem))
        if src.stem == fail:
            raise SystemExit(f"FAILED {fail}")

    try:
        run._schedule(SOURCES, execute, jobs)
    except SystemExit as error:
        return events, str(error)
    return events, None


@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_notebooks_start_once_what_they_read_is_written(jobs):
    events, error = _scheduled(jobs)
    waits = waits_for([src.stem for src in SOURCES])
    ended, running, most = set(), set(), 0
    for kind, stem in events:
        if kind == "start":
            assert waits[stem] <= ended, f"{stem} started before {sorted(waits[stem] - ended)} ended"
            running.add(stem)
            most = max(most, len(running))
        else:
            running.discard(stem)
            ended.add(stem)
    assert error is None and ended == set(STEPS) and most <= jobs
    starts = [stem for kind, stem in events if kind == "start"]
    assert starts == sorted(STEPS) if jobs == 1 else starts[0] == "01_discovery"  # the most waited-for first
    assert waits["05_controls"] == {"01_discovery", "02_overlap", "03_cers", "04_ncs"}
    # the result cache's chunks they cut from: 01's discovery (06's and 07's), 07's head masses (08's)
    assert waits["06_cross_model"] == {"01_discovery"} and waits["08_methods"] == {"01_discovery", "07_protocol"}
    if jobs > 1:
        assert most == jobs  # after 01, more notebooks are ready than jobs


def test_after_a_failure_no_notebook_starts_and_the_failure_is_raised():
    events, error = _scheduled(2, fail="01_discovery")
    started = {stem for kind, stem in events if kind == "start"}
    assert error == "FAILED 01_discovery"
    assert not started & {"02_overlap", "03_cers", "04_ncs", "05_controls", "07_protocol"}


def test_unknown_notebook_prefix_lists_available():
    with pytest.raises(SystemExit, match="00_design"):
        run.select(["42"])


@pytest.mark.notebooks
def test_smoke_run_of_every_notebook(smoke_run):
    """`python -m helpers.run --smoke`: every notebook end to end with small sizes, into build/smoke/."""
    out = smoke_run["folder"]
    for notebook, step in STEPS.items():
        for name in step.output_files():
            assert (out / name).exists(), f"{notebook} did not write {name}"
        for name in step.data_writes:
            assert (out / "data" / name).exists(), f"{notebook} did not write data/{name}"
        executed = json.loads((out / "notebooks" / f"{notebook}.ipynb").read_text())
        images = [o for c in executed["cells"] for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
        assert len(images) >= step.n_figures, f"{notebook} shows {len(images)} figures, declares {step.n_figures}"
        assert (out / "notebooks" / f"{notebook}.html").stat().st_size > 10_000
    assert (out / "design_grid.png").stat().st_size > 10_000
    assert len(list((out / "data" / "headsets").glob("*.json"))) == 24
    assert (out / "design_settings.csv").read_text().count("\n") == 13
    run_record = json.loads((out / "notebooks" / "run.json").read_text())
    assert set(run_record["seconds_per_notebook"]) == set(STEPS) and run_record["parameters"] == {"smoke": True}
    assert smoke_run["published_after"] == smoke_run["published_before"], "a smoke run wrote into paper_figures/"


def test_only_the_default_configuration_publishes():
    from helpers.storage import runs

    assert runs.folders_for("toy", {}, publish=True) == runs.PUBLISHED
    scratch = runs.folders_for("toy", {"n_strips": 40})
    assert scratch.out.parent == paths.RUNS and scratch.data == scratch.out / "data"
    assert runs.folders_for("toy", {"n_strips": 40}) == scratch  # the same changes, the same folder
    assert runs.folders_for("toy", {"n_strips": 41}).out != scratch.out
    assert runs.folders_for("toy", {}).data == paths.DATA  # the default configuration reads the published data
    assert runs.folders_for("toy", {}).out == paths.RUNS / "toy-default"
    assert runs.folders_for("/models/my-vlm", {}).out.name.startswith("models-my-vlm-")


def test_runner_checks_a_notebooks_inputs_first_and_names_the_producer(tmp_path):
    from helpers.storage import runs

    folders = runs.in_folder(tmp_path)
    source = paths.NOTEBOOKS / "04_ncs.py"
    with pytest.raises(SystemExit, match="run 01_discovery first"):
        run.check_inputs(source, folders, earlier=[])
    run.check_inputs(source, folders, earlier=["01_discovery"])  # made earlier in the same run: fine


def test_parameters_are_gathered_from_the_parameters_cell():
    from helpers.runner import params

    declared = params.declared_parameters("03_cers")
    namespace = {**declared, "beta": 3.0}
    gathered = params.gather(namespace, "03_cers")
    assert gathered.beta == 3.0 and gathered.n_items == declared["n_items"]
    assert gathered.out_dir.parent == paths.RUNS and gathered.data_dir == gathered.out_dir / "data"
    assert params.gather(dict(declared), "03_cers").data_dir == paths.DATA


def test_a_published_copy_names_no_machine_paths_and_a_rerun_in_lab_does_not_publish():
    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("out_dir = None", metadata={"tags": ["parameters"]}),
            nbformat.v4.new_code_cell(
                f"out_dir = {str(paths.PAPER_FIGURES)!r}\n", metadata={"tags": ["injected-parameters"]}
            ),
        ],
        metadata={
            "papermill": {
                "input_path": str(paths.BUILD / "runner" / "x.ipynb"),
                "parameters": {"out_dir": str(paths.PAPER_FIGURES), "data_dir": str(paths.DATA)},
            }
        },
    )
    run._unpin_folders(notebook)
    record = notebook.metadata["papermill"]
    assert record["input_path"] == "build/runner/x.ipynb"
    assert record["parameters"] == {"out_dir": "paper_figures", "data_dir": "data"}
    injected = notebook.cells[1].source
    assert str(paths.ROOT) not in injected and "#   out_dir = 'paper_figures'" in injected
    assert all(line.startswith("#") for line in injected.splitlines())  # a rerun keeps the defaults


def test_the_published_executed_notebooks_carry_no_absolute_folder_and_no_progress_bar():
    for path in sorted(paths.PUBLISHED_NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        record = notebook.metadata["papermill"]
        assert not record["input_path"].startswith("/") and not record["output_path"].startswith("/"), path.name
        assert not any(str(v).startswith("/") for v in record["parameters"].values()), path.name
        injected = [c for c in notebook.cells if "injected-parameters" in c.metadata.get("tags", [])]
        assert all(line.startswith("#") for c in injected for line in c.source.splitlines()), path.name
        outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs]
        shown = json.dumps(outputs)
        assert str(paths.ROOT) not in shown and "PosixPath('/" not in shown, f"{path.name} prints an absolute path"
        widgets = [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
        bars = [o for o in outputs if o.get("name") == "stderr" and "%|" in o.get("text", "")]
        assert not widgets and not bars, f"{path.name}: {len(widgets)} widget and {len(bars)} progress-bar outputs"


def _mtimes(root: Path) -> dict:
    return {p: p.stat().st_mtime for p in root.rglob("*") if p.is_file()} if root.exists() else {}


@pytest.mark.notebooks
def test_out_is_honoured_in_smoke_mode_and_a_fresh_folder_reads_nothing_from_elsewhere(tmp_path):
    """`--smoke --out DIR` (and `-p out_dir DIR`): every table, figure, data file and executed notebook of the run
    lands in DIR, nothing in build/smoke/ or paper_figures/; a later notebook pointed at another fresh folder does
    not read the earlier run's data from a shared folder: it is refused, naming the producer."""
    shared_before = {**_mtimes(paths.BUILD / "smoke"), **_mtimes(paths.PAPER_FIGURES), **_mtimes(paths.DATA)}
    out, cache_dir = tmp_path / "run", tmp_path / "cache"
    command = [sys.executable, "-m", "helpers.run", "00", "01", "--smoke", "-p", "out_dir", str(out)]
    proc = subprocess.run(command + ["-p", "cache_dir", str(cache_dir)], cwd=paths.ROOT, capture_output=True,
                          text=True, timeout=1200)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for name in ("00_design", "01_discovery"):
        assert all((out / f).is_file() for f in STEPS[name].output_files()), name
        assert all((out / "data" / f).is_file() for f in STEPS[name].data_writes), name
        assert (out / "notebooks" / f"{name}.ipynb").is_file()
    assert json.loads((out / "notebooks" / "run.json").read_text())["parameters"]["out_dir"] == str(out)
    shared_after = {**_mtimes(paths.BUILD / "smoke"), **_mtimes(paths.PAPER_FIGURES), **_mtimes(paths.DATA)}
    assert shared_after == shared_before, "the run wrote outside its --out folder"
    with pytest.raises(SystemExit, match="run 01_discovery first"):
        run.main(["04", "--smoke", "--out", str(tmp_path / "fresh"), "-p", "cache_dir", str(cache_dir)])
