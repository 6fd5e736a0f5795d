"""Notebook 06's helpers at tiny sizes: the baseline audit's flags, Table 8's ranges, Figure 7's overlaps,
the toy cards' targets and the `models` parameter."""

import json

import numpy as np
import pytest

from helpers.runner import params
from helpers.storage import paths
from helpers.studies.cross_model.runs import AUDIT, NATIVE, audit_row, card_targets, overlap_rows, ranges


def test_audit_flags_each_baseline_outside_its_range_and_a_toy_that_misses_card_targets():
    good = {"oracle grid": [1.0, 0.9], "blank floor": [0.2, 0.3], "matched": [0.95, 1.0], "mismatched": [0.25, 0.25]}
    row = audit_row({k: np.array(v) for k, v in good.items()}, (8, 8))
    assert row["passes"] and row["flagged"] == "" and row["oracle grid"] == pytest.approx(0.95)
    bad = dict(good, **{"blank floor": [0.6, 0.7], "matched": [0.3, 0.2]})
    row = audit_row({k: np.array(v) for k, v in bad.items()}, (2, 8))
    assert not row["passes"] and row["card targets"] == "2/8"
    assert row["flagged"] == "blank floor, matched, card targets"
    assert audit_row({k: np.array(v) for k, v in good.items()}, None)["card targets"] == "-"
    assert list(AUDIT) == ["oracle grid", "blank floor", "matched", "mismatched"]


def test_card_targets_of_the_shipped_and_further_toys(tmp_path, monkeypatch):
    assert card_targets("toy") == (8, 8)
    assert card_targets("Qwen/Qwen3-VL-8B-Instruct") is None
    monkeypatch.setattr(paths, "TOY_MODELS", tmp_path)
    (tmp_path / "half").mkdir()
    results = {f"task {i}": {"passes": i % 2 == 0} for i in range(8)}
    (tmp_path / "half" / "heldout_accuracy.json").write_text(json.dumps({"results": results}))
    assert card_targets("toy-half") == (4, 8)  # a card that misses half its targets
    assert card_targets("toy-nonesuch") is None  # no card


def test_ranges_take_s_and_the_first_random_draw():
    runs = {
        "a": {"ncs": np.array([[0.2, 0.0, 9.0], [0.4, 0.2, 9.0]])},  # [N, 1 + R]: S, draw 1, draw 2
        "b": {"ncs": np.array([[0.1, -0.1, 9.0], [0.1, -0.1, 9.0]])},
    }
    assert ranges(runs, "ncs", ["a", "b"]) == pytest.approx(
        {"S min": 0.1, "S max": 0.3, "random min": -0.1, "random max": 0.1}
    )


def test_overlap_rows_count_shared_heads_and_the_chance_line():
    scores = np.arange(32, dtype=float).reshape(4, 8)  # [L, H]
    means = {NATIVE["ord-last"]: scores, NATIVE["ref-qspan"]: scores, NATIVE["ref-out"]: -scores}
    rows = {row["pair"]: row for row in overlap_rows(means, 4, 2000, 0)}
    assert rows["ord-last / ref-qspan"]["shared"] == 4 and rows["ord-last / ref-qspan"]["per 100"] == 100
    assert rows["ord-last / ref-out"]["shared"] == 0 and rows["ref-qspan / ref-out"]["shared"] == 0
    assert rows["random / ord-last"]["shared"] == pytest.approx(4 * 4 / 32, abs=0.05)  # k^2 / heads


def test_models_parameter_takes_toy_names_and_refuses_unknown_ones():
    assert params.CHECKS["models"](["toy", "toy-qwen2vl", "toy-modular"])[1] == "toy-qwen2vl"
    with pytest.raises(params.ParameterError, match="toy-qwen2vl"):
        params.CHECKS["models"](["toy-nonesuch"])
    with pytest.raises(params.ParameterError, match="distinct"):
        params.CHECKS["models"](["toy", "toy"])


def test_sweeps_are_the_top_k_sets_masked_and_the_top_set_steered_at_each_beta(tmp_path):
    """06's curves for the resolution table: NCS of each k's top set (one masking run), CERS at each beta."""
    from helpers.engine import load_model
    from helpers.measures.necessity import ncs
    from helpers.measures.overlap import top_k
    from helpers.measures.steering import cers
    from helpers.storage.cache import ResultCache
    from helpers.studies.cross_model.runs import sweeps
    from helpers.studies.evaluation import Evaluation

    evaluation = Evaluation(load_model("toy"), "co", 2, 0, ResultCache(tmp_path))
    scores = np.random.default_rng(0).random((8, 16))
    curves = sweeps(evaluation, scores, 11, [0.0174, 6, 0.0868], [1, 10])
    assert list(curves["NCS vs k"]) == [2, 6, 11] and list(curves["CERS vs beta"]) == [1.0, 10.0]
    alone = ncs(evaluation.mask(top_k(scores, 6)[None])).mean()  # another batch: float32 sums differ by ~1e-8
    assert curves["NCS vs k"][6] == pytest.approx(alone, abs=1e-6)
    steered = cers(evaluation.steer(top_k(scores, 11)[None], beta=10.0)).mean()
    assert curves["CERS vs beta"][10.0] == pytest.approx(steered, abs=1e-6)
