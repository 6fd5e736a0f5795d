"""Notebook 06's resolution table on small known inputs: cells printed as 0.000, random-set SDs, capped z, the
mismatched arm's drops, monotone sweeps, the single-head summary and a failing model's row."""

import numpy as np
import pandas as pd
import pytest

from helpers import sizes
from helpers.measures.controls import spill_notes
from helpers.measures.stats import Z_CAP
from helpers.runner import params
from helpers.studies.cross_model.resolution import (
    NOT_RUN,
    PROBE_COLUMNS,
    causal_cells,
    monotone,
    prints_as_zero,
    resolution_row,
    resolution_table,
    single_head_summary,
    summary_sentence,
    sweep_monotone,
)
from helpers.studies.cross_model.runs import controls_of


def _runs():
    """Two settings of causal_runs' shape: "a" with R = 3 (a graded NCS), "b" with one draw (values all 0)."""
    a_ncs = np.array([[0.30, 0.10, 0.12, 0.08], [0.50, 0.10, 0.08, 0.12]])  # S 0.4; set means 0.1, 0.1, 0.1
    return {
        "a": {
            "ncs": a_ncs,
            "mismatched drop": np.array([[0.0002, 0.01, 0.0, 0.0], [0.0, 0.01, 0.0, 0.0]]),
            "cers": np.array([[0.2, 0.0001], [0.2, -0.0001]]),
            "grid accuracy": 1.0,  # not a per-item run: skipped
        },
        "b": {
            "ncs": np.zeros((2, 2)),
            "mismatched drop": np.zeros((2, 2)),
            "cers": np.array([[0.0004, 0.0], [0.0004, 0.0]]),
            "grid accuracy": 1.0,
        },
    }


def test_prints_as_zero_as_the_three_decimal_tables():
    values = np.array([0.0, 0.0004, -0.0004, 0.0006, -0.0006, 0.001, 1e-9])
    assert prints_as_zero(values).tolist() == [True, True, True, False, False, False, True]
    assert prints_as_zero(np.array([0.004]), digits=2).tolist() == [True]


def test_cells_count_s_and_random_means_and_those_printed_as_zero():
    row = resolution_row({"runs": _runs(), "audit": "passes"})
    # cells: 2 settings x (ncs, cers) x (S, random mean) = 8; zeros: a cers random (0.0), b ncs S and random,
    # b cers S (0.0004) and random (0.0)
    assert (row["cells"], row["cells at 0.000"]) == (8, 5)
    assert row["share at 0.000"] == pytest.approx(5 / 8)


def test_random_sd_and_capped_z_of_runs_with_several_draws():
    cells = {(c["setting"], c["measure"]): c for c in causal_cells(_runs())}
    a = cells[("a", "ncs")]
    assert a["R"] == 3 and a["S"] == pytest.approx(0.4) and a["random mean"] == pytest.approx(0.1)
    assert a["random sd"] < 1e-12 and a["z capped"] and a["z"] == Z_CAP  # equal set means: z at the cap
    assert np.isnan(cells[("b", "ncs")]["random sd"]) and not cells[("b", "ncs")]["z capped"]  # one draw: no z
    row = resolution_row({"runs": _runs()})
    assert (row["z"], row["z capped"]) == (1, 1)
    assert (row["NCS SD settings"], row["NCS SD at 0.000"]) == (1, 1)
    assert row["CERS SD settings"] == 0 and np.isnan(row["CERS median SD"])  # no CERS run with R >= 2


def test_contrast_runs_join_the_cells_and_a_graded_sd_is_counted():
    contrasts = {
        "c": {
            "NCS_grid": np.array([[0.3, 0.0, 0.01, 0.02], [0.3, 0.0, 0.01, 0.02]]),  # set means 0, 0.01, 0.02
            "symmetric CERS": np.array([[0.1, 0.2, -0.2, 0.0], [0.1, 0.2, -0.2, 0.0]]),  # set means 0.2, -0.2, 0
        }
    }
    row = resolution_row({"runs": _runs()}, contrasts)
    assert row["cells"] == 12 and row["NCS SD settings"] == 2 and row["CERS SD settings"] == 1
    assert row["NCS median SD"] == pytest.approx(0.005)  # median of ~0 and 0.01
    assert row["CERS median SD"] == pytest.approx(0.2) and row["CERS SD at 0.000"] == 0
    assert row["z"] == 3 and row["z capped"] == 1  # only "a" has equal random set means


def test_mismatched_drops_mean_over_sets_and_the_zeros():
    row = resolution_row({"runs": _runs()})
    # set means: a: 0.0001, 0.01, 0, 0; b: 0, 0 -> six sets, five print 0.000
    assert (row["mismatched sets"], row["mismatched at 0.000"]) == (6, 5)
    assert row["mismatched mean drop"] == pytest.approx(0.0101 / 6)


@pytest.mark.parametrize(
    "values, expected",
    [
        ([0.0, 0.1, 0.1, 0.3], "increasing"),
        ([0.3, 0.2, 0.2], "decreasing"),
        ([0.1, 0.1, 0.1004], "flat"),  # equal at three decimals
        ([0.0, 0.2, 0.1], "no"),
        ([0.1, 0.1004, 0.1001, 0.2], "increasing"),  # a dip below the printed resolution is no dip
    ],
)
def test_monotone_sequences(values, expected):
    assert monotone(values) == expected


def test_sweeps_follow_their_parameter_order_and_default_to_not_run():
    assert sweep_monotone({40: 0.3, 10: 0.1, 20: 0.2}) == "increasing"
    assert sweep_monotone(None) == NOT_RUN
    row = resolution_row({"runs": _runs()}, sweeps={"CERS vs beta": {1.0: 0.2, 5.0: 0.1, 10.0: 0.3}})
    assert row["NCS vs k monotone"] == NOT_RUN and row["CERS vs beta monotone"] == "no"
    with pytest.raises(ValueError, match=">= 2"):
        monotone([0.1])


def test_single_head_summary_counts_heads_above_min_effect():
    profile = {
        "ncs": np.array([[0.0, 0.05], [0.2, -0.01]]),
        "matched drop": np.array([[0.005, 0.011], [0.3, 0.01]]),  # 0.01 is not above 0.01
        "items": 4,
    }
    summary = single_head_summary(profile)
    assert summary == {
        "single-head items": 4,
        "heads": 4,
        "heads drop > 0.01": 2,
        "largest single-head NCS": pytest.approx(0.2),
        "at (layer, head)": "(1, 0)",
    }
    missing = single_head_summary(None)
    assert missing["heads"] == 0 and np.isnan(missing["largest single-head NCS"])


def test_a_failing_model_keeps_its_row_and_flags_and_the_sentence_names_it():
    flat = {"ncs": np.zeros((2, 4)), "mismatched drop": np.zeros((2, 4)), "cers": np.zeros((2, 2))}
    profile = {"ncs": np.full((2, 2), 0.3), "matched drop": np.full((2, 2), 0.5), "items": 2}
    results = {
        "good": {"runs": _runs(), "audit": "passes", "flagged": "", "single head": None},
        "bad": {"runs": {"x": flat}, "audit": "FAILS", "flagged": "card targets", "single head": profile},
    }
    table = resolution_table(results, {})
    assert table["model"].tolist() == ["good", "bad"]
    bad = table.set_index("model").loc["bad"]
    assert bad["audit"] == "FAILS" and bad["flagged"] == "card targets" and bad["share at 0.000"] == 1.0
    sentence = summary_sentence(table)
    assert "Fewest causal cells printed as 0.000: good (62% of 8)" in sentence
    assert "most: bad [fails its audit] (100% of 4)" in sentence
    assert "bad [fails its audit] (4 of 4)" in sentence and "(0.300)" in sentence
    assert summary_sentence(pd.DataFrame()) == "No model was run."


def test_a_model_without_causal_runs_is_listed_with_its_single_head_profile():
    profile = {"ncs": np.full((2, 2), 0.02), "matched drop": np.full((2, 2), 0.05), "items": 2}
    flagged = "card targets, no layer-matched sets for co-ref-qsp"
    results = {"unmatched": {"runs": {}, "audit": "FAILS", "flagged": flagged, "single head": profile}}
    table = resolution_table(results, {})
    row = table.iloc[0]
    assert row["cells"] == 0 and np.isnan(row["share at 0.000"]) and row["mismatched sets"] == 0
    assert row["flagged"] == flagged and row["heads drop > 0.01"] == 4
    sentence = summary_sentence(table)
    assert sentence.startswith("No model has causal cells.") and "unmatched [fails its audit] (4 of 4)" in sentence


def test_spill_notes_name_the_sets_whose_controls_borrow_from_other_layers():
    fits, crowded = np.zeros((2, 4), dtype=bool), np.zeros((2, 4), dtype=bool)
    fits[0, :2] = True  # 2 of 4 heads in layer 0: 2 outside
    crowded[0, :3] = True  # 3 of 4: 1 outside, 2 from layer 1
    assert spill_notes({"fits": fits, "crowded": crowded}) == "crowded: 2 from layer 1"
    assert spill_notes({"fits": fits}) == ""
    controls = controls_of({"crowded": crowded}, 5, seed=0)["crowded"]
    assert (controls.sum(2) == [1, 2]).all() and not (controls & crowded).any()


def test_single_head_items_by_profile_and_smoke():
    for profile, smoke in (("default", False), ("paper", False), ("default", True), ("paper", True)):
        p = params.validate(dict(profile=profile, smoke=smoke))
        expected = sizes.SINGLE_HEAD_ITEMS[profile]
        assert sizes.single_head_items(p) == (min(expected, sizes.SMOKE_SINGLE_HEAD_ITEMS) if smoke else expected)


def test_probe_columns_read_the_profile_and_are_nan_without_one():
    profile = {
        "k": 11,
        "largest layer share": 0.42,
        "clean log-odds": {"median": 5.1, "p10": 4.0, "p90": 6.0},
        "random": {11: {"ncs": {"mean": 0.01, "sd": 0.006}, "log-odds drop": {"mean": 0.5, "sd": 1.2}}, 22: {}},
    }
    row = resolution_row({"runs": _runs(), "probe": profile})
    assert [row[column] for column in PROBE_COLUMNS] == [0.42, 5.1, 0.006, 1.2]
    assert all(np.isnan(resolution_row({"runs": _runs()})[column]) for column in PROBE_COLUMNS)
