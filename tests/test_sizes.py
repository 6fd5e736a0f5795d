"""The profiles' sizes per analysis, smoke over profile, the runner's check of out_reads, and the claims table."""

import pandas as pd
import pytest

from helpers import run
from helpers.runner import params, sizes, steps
from helpers.storage import runs
from helpers.studies import claims


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
    assert p.n_items == params.SMOKE["n_items"] and p.n_boot == params.SMOKE["n_boot"]
    assert max(sizes.n_random(p, a, s) for a in sizes.RANDOM_SETS for s in sizes.REF_QSP) <= 4


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


def _fixture_tables(out_dir, cers_p=0.2, holm_p=0.048, cers_r=20):
    """Small tables of the shape notebooks 02-05 write, with chosen numbers."""
    pd.DataFrame(
        {"comparison": ["source", "query", "corpus", "half-split"], "median share of k": [0.45, 0.6, 0.8, 0.9]}
    ).to_csv(out_dir / "table01_overlap_by_factor.csv", index=False)
    pd.DataFrame({"comparison": ["qsp - last"], "mean difference": [0.09], "p (paired t)": [1e-9]}).to_csv(
        out_dir / "ncs_source_contrast.csv", index=False
    )
    settings = ["cm-ord-last", "co-ref-qsp"]
    pd.DataFrame(
        {
            "setting": settings,
            "S": [0.1, 0.5],
            "R": cers_r,
            "p": [cers_p, 0.5],
            "any-layer min": 0.0,
            "any-layer max": 0.3,
        }
    ).to_csv(out_dir / "table03_cers.csv", index=False)
    pd.DataFrame(
        {"setting": settings, "S": [0.02, 0.4], "R": [20, 250], "p": [0.3, 1 / 251], "p Holm": [1, 0.05]}
    ).to_csv(out_dir / "table03_ncs.csv", index=False)
    pd.DataFrame(
        {
            "setting": ["cm-ref-qsp", "co-ref-qsp"],
            "R": 250,
            "S": [0.3, 0.4],
            "random mean": 0.0,
            "random sd": [0.01, 0.02],
            "p": 1 / 251,
            "z": [30.0, 1000.0],
            "z capped": [False, True],
            "p Holm (12 settings)": [holm_p, holm_p],
            "Holm R's": "20 (10 settings), 250 (2 settings)",
        }
    ).to_csv(out_dir / "table10_large_r.csv", index=False)


def test_claims_on_fixture_tables_give_the_expected_verdicts(tmp_path):
    _fixture_tables(tmp_path)
    table = claims.claims(tmp_path).set_index("claim")
    assert table.loc["source overlap", "this run"] == pytest.approx(45.0)
    assert table.loc["ref-qsp far above random", "this run"] == 30.0
    assert "capped" in table.loc["ref-qsp far above random", "detail"]
    assert table.loc["Holm across 12 settings", "this run"] == 0.048
    assert (
        table.loc["Holm across 12 settings", "detail"]
        == "Holm over 12 settings at R = 20 (10 settings), 250 (2 settings): 0.048, 0.048"
    )
    assert table.loc["any-layer sets span S", "this run"] == 1.0  # 0.5 lies above the any-layer max
    expected = {
        "source overlap": "yes",
        "query overlap": "yes",
        "corpus overlap": "yes",
        "half-split overlap": "yes",
        "necessity follows the source": "yes",
        "ref-qsp far above random": "yes",
        "Holm across 12 settings": "yes",
        "no steering advantage": "yes",
        "any-layer sets span S": "no",
    }
    assert table["holds"].to_dict() == expected
    assert table.loc["ref-qsp far above random", "paper"] == "17-19 (from its rounded Table 10: 16.3, 18.1)"

    _fixture_tables(tmp_path, cers_p=1 / 21, holm_p=0.571)
    table = claims.claims(tmp_path).set_index("claim")
    assert (
        table.loc["no steering advantage", "holds"] == "no" and table.loc["Holm across 12 settings", "holds"] == "no"
    )

    _fixture_tables(tmp_path, cers_r=3)  # p = .2 is above .14 even at the floor 1/4: the claim cannot fail there
    verdict = claims.claims(tmp_path).set_index("claim").loc["no steering advantage", "holds"]
    assert verdict == "not testable at this R"


def test_settings_at_the_floor_are_counted_at_the_tables_precision(tmp_path):
    table = pd.DataFrame({"R": [20, 20, 250, 100, 20], "p": [0.048, 0.095, 0.004, 0.010, 0.571]})  # as written
    assert claims._at_floor(table) == "3 of 5"


def test_results_md_holds_the_claims_and_headlines(tmp_path):
    _fixture_tables(tmp_path)
    path = claims.write_results(tmp_path, claims.claims(tmp_path), "fixture run")
    text = path.read_text()
    assert path.name == "RESULTS.md" and "fixture run" in text
    assert text.count("\n| ") >= 9 + 7  # nine claims, seven headline rows
    assert "z = 1000.0 (capped)" in text and "0.400 (co-ref-qsp, p = 0.004 at R = 250)" in text
