import subprocess
import sys

import pytest
import torch
from PIL import Image

from helpers import run, sizes
from helpers.runner import params
from helpers.stimuli.design import SETTINGS, k_for, parse_setting
from helpers.storage import paths


def test_valid_parameters_pass_and_smoke_shrinks_sizes(tmp_path):
    p = params.validate(
        dict(
            model="toy",
            device="cpu",
            dtype="bfloat16",
            k=0.087,
            n_items=400,
            n_random=20,
            seed=0,
            smoke=True,
            out_dir=str(tmp_path),
            settings="all",
        )
    )
    assert p.n_items == sizes.SMOKE_SIZES["n_items"] and p.n_random == sizes.SMOKE_SIZES["n_random"]
    assert p.settings == list(SETTINGS) and p.out_dir == tmp_path
    assert params.validate(dict(n_items=400, smoke=False)).n_items == 400
    auto = params.validate(dict(device="auto", dtype="auto"))
    expected = ("cuda", "bfloat16") if torch.cuda.is_available() else ("cpu", "float32")
    assert (auto.device, auto.dtype) == expected


@pytest.mark.parametrize(
    "name, value, fragment",
    [
        ("settings", ["cm-ord-last", "cm-xyz-last"], "cm-ref-qsp"),
        ("k", 0, "int >= 1"),
        ("k", 1.5, "share 0 < k < 1"),
        ("n_items", 1, "int >= 2"),
        ("n_strips", "10", "int >= 2"),
        ("device", "gpu", "cpu, cuda, mps, auto"),
        ("dtype", "fp8", "float32, bfloat16"),
        ("model", "not a model", "hub id"),
        ("smoke", "yes", "True or False"),
        ("n_random", 1, "int >= 2"),
        ("beta", 0, "finite number > 0"),
        ("beta", float("inf"), "finite number > 0"),
        ("betas", [], "non-empty list"),
        ("ks", [], "non-empty list of head-set sizes"),
        ("ks", [0.1, 0], "each an int >= 1 (heads) or a float share"),
        ("n_random_large", 1, "int >= 2"),
        ("betas", [1, -3], "finite numbers > 0"),
        ("row_group", "question", "'all', 'image', 'prompt', 'last'"),
        ("eval_corpus", "/no/such/folder", "'cm', 'co', an image folder (class sub-folders) or a CSV"),
    ],
)
def test_bad_values_name_the_value_and_the_allowed_ones(name, value, fragment):
    with pytest.raises(params.ParameterError) as err:
        params.validate({name: value})
    assert f"{name}={value!r}" in str(err.value) and fragment in str(err.value)


def test_unknown_parameter_lists_known_ones():
    with pytest.raises(params.ParameterError, match="unknown parameter.*'n_itemz'.*n_items"):
        params.validate({"n_itemz": 3})


def test_a_parameter_under_its_old_name_names_the_new_one(tmp_path, monkeypatch):
    monkeypatch.setattr("helpers.engine.copy_ledger.install_counter", lambda: None)  # gather's, for a kernel
    notebook = paths.NOTEBOOKS / "04_ncs.py"
    for check in (
        lambda: params.validate({"rows": "last"}),
        lambda: params.check_run(notebook, {"rows": "last"}),
        lambda: params.gather({**params.declared_parameters("04_ncs"), "rows": "last"}, "04_ncs"),  # papermill's -p
    ):
        with pytest.raises(params.ParameterError, match="rows= is now row_group="):
            check()
    with pytest.raises(SystemExit, match="rows= is now row_group="):
        run.run([notebook], {"rows": "last"}, tmp_path)


def test_design_names_and_k():
    assert len(SETTINGS) == 12 and len(set(SETTINGS)) == 12
    assert parse_setting("co-ref-out").source == "out"
    with pytest.raises(ValueError, match="allowed: cm-ord-last"):
        parse_setting("cm-ref-all")
    assert k_for(1152) == 100 and k_for(144) == 12 and k_for(144, 20) == 20
    with pytest.raises(ValueError, match="k=200"):
        k_for(144, 200)


def test_environment_files_install_the_pins_and_the_cpu_one_no_cuda():
    """environment.yml and environment-cpu.yml take every pin from requirements*.txt (no second list to drift);
    the CPU one takes torch from PyTorch's CPU index and not the CUDA libraries' pins. The cluster pins are in
    neither."""
    from helpers.storage import paths

    for name, cpu in (("environment.yml", False), ("environment-cpu.yml", True)):
        env = (paths.ROOT / name).read_text()
        files = {line.strip()[len("- -r ") :] for line in env.splitlines() if line.strip().startswith("- -r ")}
        assert files == {"requirements.txt", "requirements-dev.txt", *(() if cpu else ("requirements-cuda.txt",))}
        assert "==" not in env and "pytorch-cuda" not in env and "nvidia" not in env, name
        assert ("download.pytorch.org/whl/cpu" in env) == cpu, name
    for name in ("requirements.txt", "requirements-cuda.txt", "requirements-dev.txt", "requirements-cluster.txt"):
        pins = [l for l in (paths.ROOT / name).read_text().splitlines() if l.strip() and not l.startswith("#")]
        assert pins and all("==" in l for l in pins), name


def test_the_install_ranges_admit_the_pins_and_each_is_pinned():
    """pyproject.toml's dependencies and extras are ranges (no ==) that each pinned version satisfies, and the lock
    of each pins its packages (with every distribution they need: a full lock)."""
    import tomllib

    from packaging.requirements import Requirement

    from helpers.storage import paths

    project = tomllib.loads((paths.ROOT / "pyproject.toml").read_text())["project"]
    groups = {"requirements.txt": project["dependencies"], **{
        f"requirements-{extra}.txt": project["optional-dependencies"][extra] for extra in ("dev", "cluster")
    }}  # fmt: skip
    for lock, ranges in groups.items():
        required = {Requirement(r).name.lower(): Requirement(r).specifier for r in ranges}
        pins = dict(
            line.split("#")[0].strip().split("==")
            for line in (paths.ROOT / lock).read_text().splitlines()
            if line.split("#")[0].strip()
        )
        pins = {name.lower(): version for name, version in pins.items()}
        assert set(required) <= set(pins), (lock, set(required) - set(pins))
        for name, specifier in required.items():
            assert "==" not in str(specifier) and specifier.contains(pins[name]), (name, specifier, pins[name])


def test_causal_parameters_are_normalised(tmp_path):
    for label in ("cat", "dog", "car", "cup"):  # the 2x2 grid needs four classes
        (tmp_path / label).mkdir()
        Image.new("RGB", (8, 8)).save(tmp_path / label / "0.png")
    p = params.validate(dict(beta=3, betas=[100, 1, 10], row_group="prompt", eval_corpus=str(tmp_path)))
    assert p.beta == 3.0 and p.betas == [1.0, 10.0, 100.0] and p.row_group == "prompt"
    assert p.eval_corpus == str(tmp_path)


def test_device_auto_schedules_by_the_device_it_resolves_to(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert run.default_jobs({"device": "auto"}) == 2 == run.default_jobs({})  # a CPU: two notebooks side by side
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert run.default_jobs({"device": "auto"}) == 1 == run.default_jobs({"device": "cuda"})


def test_the_parameter_checks_import_no_torch():
    """A bad value is refused without torch or transformers (about half a second, bench/bench_checks.py)."""
    heavy = "{'torch', 'transformers', 'jupytext'}"
    code = f"import sys, helpers.run, helpers.runner.params; print(sorted({heavy} & set(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=paths.ROOT, capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "[]", proc.stdout + proc.stderr


@pytest.mark.parametrize("notebook", sorted(p.stem for p in paths.NOTEBOOKS.glob("[0-9][0-9]_*.py")))
def test_papermill_reads_every_parameter_the_checker_reads(notebook, tmp_path):
    """The runner injects and plans with papermill's view of the parameters cell: a line papermill cannot
    parse (a trailing comment with commas, say) would drop that parameter from its view."""
    import jupytext
    import papermill

    ipynb = tmp_path / f"{notebook}.ipynb"
    jupytext.write(jupytext.read(paths.NOTEBOOKS / f"{notebook}.py"), ipynb)
    assert set(papermill.inspect_notebook(str(ipynb))) == set(params.declared_parameters(notebook))
