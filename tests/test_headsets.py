import numpy as np
import pytest

from helpers import headsets


def test_round_trip_best_first(tmp_path):
    scores = np.array([[0.1, 0.7, 0.3], [0.9, 0.2, 0.5]])
    mask = scores > 0.4
    path = headsets.save(
        tmp_path / "hs.json", model="toy", setting="cm-ref-qsp", selection="flat top-k", mask=mask, scores=scores
    )
    record = headsets.load(path)
    assert record["heads"] == [[1, 0], [0, 1], [1, 2]] and record["k"] == 3
    assert record["scores"] == [0.9, 0.7, 0.5]
    assert (record["mask"] == mask).all()


def test_out_of_range_head_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"head \[2, 0\] is out of range for 2 layers x 3 heads"):
        headsets.to_mask([[0, 1], [2, 0]], 2, 3)
    (tmp_path / "x.json").write_text('{"model": "toy"}')
    with pytest.raises(ValueError, match="lacks"):
        headsets.load(tmp_path / "x.json")


def test_load_settings_checks_presence_and_model(tmp_path):
    scores = np.arange(6.0).reshape(2, 3)
    headsets.save(
        tmp_path / "cm-ref-qsp.json",
        model="toy",
        setting="cm-ref-qsp",
        selection="flat top-k",
        mask=scores > 3,
        scores=scores,
    )
    masks = headsets.load_settings(tmp_path, ["cm-ref-qsp"], "toy", 2, 3)
    assert (masks["cm-ref-qsp"] == (scores > 3)).all()
    with pytest.raises(FileNotFoundError, match="co-ref-qsp.json: run notebook 01_discovery"):
        headsets.load_settings(tmp_path, ["co-ref-qsp"], "toy", 2, 3)
    with pytest.raises(ValueError, match="discovered on 'toy'"):
        headsets.load_settings(tmp_path, ["cm-ref-qsp"], "Qwen/Qwen3-VL-8B-Instruct", 2, 3)
    with pytest.raises(ValueError, match=r"2 x 3 heads"):
        headsets.load_settings(tmp_path, ["cm-ref-qsp"], "toy", 4, 3)


def test_load_score_maps_reads_the_long_table(tmp_path):
    import pandas as pd

    rows = [
        {"setting": s, "layer": l, "head": h, "score": 10 * l + h + (s == "cm-ord-out")}
        for s in ("cm-ord-qsp", "cm-ord-out")
        for l in range(2)
        for h in range(3)
    ]
    pd.DataFrame(rows).to_csv(tmp_path / "discovery_scores.csv", index=False)
    maps = headsets.load_score_maps(tmp_path / "discovery_scores.csv", ["cm-ord-out"], 2, 3)
    assert (maps["cm-ord-out"] == np.array([[1, 2, 3], [11, 12, 13]])).all()
    with pytest.raises(ValueError, match="not one per head of 4 x 3"):
        headsets.load_score_maps(tmp_path / "discovery_scores.csv", ["cm-ord-out"], 4, 3)
    with pytest.raises(FileNotFoundError, match="run notebook 01_discovery"):
        headsets.load_score_maps(tmp_path / "nope.csv", ["cm-ord-out"], 2, 3)
