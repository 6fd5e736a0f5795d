"""The profiles' sizes per analysis, smoke over profile and the runner's check of out_reads."""

import pytest

from helpers import run, sizes
from helpers.runner import params, steps
from helpers.storage import runs


def _params(profile, smoke=False):
    return params.validate(
        dict(profile=profile, n_items=100, n_random=20, n_random_large=250, n_boot=2000, smoke=smoke)
    )


def test_paper_profile_takes_the_papers_sizes_per_table():
    p = _params("paper")
    assert (p.n_items, p.n_boot) == (400, 2000)
    r = {a: sizes.n_random(p, a) for a in ("table03_ncs", "table06", "table10", "table14", "table14_k100")}
    assert r == {"table03_ncs": 20, "table06": 100, "table10": 250, "table14": 20, "table14_k100": 250}
    assert sizes.n_random(p, "table03_ncs", "co-ref-qsp") == 250
    assert sizes.n_random(p, "table03_cers", "co-ref-qsp") == 20


def test_default_profile_keeps_the_notebook_sizes():
    p = params.validate(dict(profile="default", n_items=100, n_random=20, n_random_large=250, smoke=False))
    assert p.n_items == 100
    assert sizes.n_random(p, "table03_ncs", "co-ref-qsp") == 20 and sizes.n_random(p, "table06") == 20
    assert sizes.n_random(p, "table10") == 250


@pytest.mark.parametrize("profile", sizes.PROFILE_NAMES)
def test_smoke_wins_over_the_profile(profile):
    p = _params(profile, smoke=True)
    assert p.n_items == sizes.SMOKE_SIZES["n_items"] and p.n_boot == sizes.SMOKE_SIZES["n_boot"]
    assert max(sizes.n_random(p, a, s) for a in sizes.RANDOM_SETS for s in sizes.REF_QSP) == sizes.SMOKE_RANDOM


def test_cross_model_paper_profile_takes_the_papers_sizes():
    p = params.validate(dict(profile="paper", n_strips=40, n_items=20, n_random=20, n_random_grid=5, n_pointing=20))
    assert (p.n_strips, p.n_items, p.n_random, p.n_random_grid, p.n_pointing) == (400, 400, 20, 100, 80)


@pytest.mark.parametrize("notebook", sorted(steps.STEPS))
def test_every_analysis_notebook_declares_a_profile(notebook):
    declared = params.declared_parameters(notebook)
    assert notebook == "00_design" or "profile" in declared, f"{notebook} has no profile parameter"


def test_unknown_profile_is_refused():
    with pytest.raises(params.ParameterError, match="'default', 'paper'"):
        params.validate(dict(profile="fast"))


def test_runner_names_the_notebook_that_writes_a_missing_out_read(tmp_path):
    folders = runs.in_folder(tmp_path)
    (folders.data / "headsets").mkdir(parents=True)
    for name in run.STEPS["05_controls"].data_reads:
        (folders.data / name).write_text("{}")
    source = run.paths.NOTEBOOKS / "05_controls.py"
    with pytest.raises(SystemExit, match=r"table01_overlap_by_factor.csv: run 02_overlap first"):
        run.check_inputs(source, folders, [])
    run.check_inputs(source, folders, ["02_overlap", "03_cers", "04_ncs"])  # made earlier in this run
