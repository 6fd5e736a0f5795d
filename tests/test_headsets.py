import json
from pathlib import Path

import numpy as np
import pytest

from helpers.measures.imported_head_sets import read_any
from helpers.storage import headsets


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


# ------------------------------------------------------------------ schema errors and importers

FIXTURES = Path(__file__).parent / "fixtures" / "headsets"
TOP4 = [[5, 2], [0, 1], [6, 13], [3, 7]]  # the fixtures' best heads, best first
GOOD = {"model": "toy", "setting": "mine", "k": 2, "n_layers": 8, "n_heads": 16, "heads": [[0, 1], [5, 2]]}
MALFORMED = [
    ("a list of non-pairs", ["heads", "x"], r"heads\[0\]: 'heads' is not of type 'array'"),
    ("no heads", {k: v for k, v in GOOD.items() if k != "heads"}, r"lacks \['heads'\]; fix: add the missing field"),
    ("no model", {k: v for k, v in GOOD.items() if k != "model"}, r"lacks \['model'\]"),
    ("empty set", {**GOOD, "k": 1, "heads": []}, r"heads: \[\] should be non-empty; fix: list every head"),
    ("out of range", {**GOOD, "heads": [[0, 1], [8, 2]]}, r"heads\[1\] = \[8, 2\] is out of range for 8 layers"),
    ("head out of range", {**GOOD, "heads": [[0, 16], [5, 2]]}, r"heads\[0\] = \[0, 16\] is out of range"),
    ("duplicate", {**GOOD, "heads": [[0, 1], [0, 1]]}, r"heads\[1\] = \[0, 1\] repeats heads\[0\]; fix: list every"),
    ("boolean", {**GOOD, "heads": [[True, 1], [5, 2]]}, r"heads\[0\]\[0\]: True is not of type 'integer'"),
    ("fraction", {**GOOD, "heads": [[0.5, 1], [5, 2]]}, r"heads\[0\]\[0\]: 0.5 is not of type 'integer'"),
    ("float integer", {**GOOD, "heads": [[0, 1.0], [5, 2]]}, r"heads\[0\] = \[0, 1.0\] is not two integers"),
    ("negative", {**GOOD, "heads": [[0, -1], [5, 2]]}, r"heads\[0\]\[1\]: -1 is less than the minimum of 0"),
    ("triple", {**GOOD, "heads": [[0, 1, 2], [5, 2]]}, r"heads\[0\]: \[0, 1, 2\] is too long"),
    ("string head", {**GOOD, "heads": ["0-1", [5, 2]]}, r"heads\[0\]: '0-1' is not of type 'array'"),
    ("k differs", {**GOOD, "k": 5}, r"k = 5 but the file lists 2 heads; fix: set k to 2"),
    ("scores differ", {**GOOD, "scores": [0.5]}, r"1 scores for 2 heads"),
    ("other model", {**GOOD, "n_layers": 36, "n_heads": 32}, r"made for 36 layers x 32 heads .* has 8 x 16; fix"),
    ("bad key_agg", {**GOOD, "key_agg": "sum"}, r"key_agg: 'sum' is not one of \['raw', 'share'\]"),
]


@pytest.mark.parametrize("case, record, message", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_head_set_files_name_the_file_entry_and_fix(tmp_path, case, record, message):
    path = tmp_path / f"{case.replace(' ', '_')}.json"
    path.write_text(json.dumps(record))
    with pytest.raises(headsets.HeadSetError, match=message) as error:
        read_any(path, "toy", 8, 16)
    assert str(error.value).startswith(str(path)) and "fix" in str(error.value)


def test_not_json_and_missing_file(tmp_path):
    (tmp_path / "bad.json").write_text("{heads: [[0, 1]]}")
    with pytest.raises(headsets.HeadSetError, match=r"bad.json: not valid JSON .* fix: write the file as JSON"):
        read_any(tmp_path / "bad.json", "toy", 8, 16)
    with pytest.raises(headsets.HeadSetError, match="nope.json: no such file"):
        read_any(tmp_path / "nope.json", "toy", 8, 16)


def test_a_valid_file_loads_and_takes_its_stem_as_setting(tmp_path):
    record = {k: v for k, v in GOOD.items() if k != "setting"}
    (tmp_path / "mine.json").write_text(json.dumps(record))
    loaded = read_any(tmp_path / "mine.json", "toy", 8, 16)
    assert loaded["setting"] == "mine" and loaded["mask"].sum() == 2 and loaded["mask"][5, 2]
    assert read_any(FIXTURES.parents[2] / "data" / "headsets" / "co-ref-qsp.json", "toy", 8, 16)["k"] == 11


def test_import_a_list_of_pairs():
    record = read_any(FIXTURES / "pairs.json", "toy", 8, 16)
    assert record["heads"] == TOP4 and record["k"] == 4 and record["setting"] == "pairs"
    assert record["mask"].sum() == 4 and record["mask"][6, 13]
    with pytest.raises(headsets.HeadSetError, match=r"pairs.json: heads\[0\] = \[5, 2\] is out of range for 4"):
        read_any(FIXTURES / "pairs.json", "toy", 4, 1)


@pytest.mark.parametrize("name", ["scores_matrix.npy", "scores_matrix.csv", "scores_dash.json", "scores_dot.json"])
def test_import_scores_takes_the_top_k(name):
    record = read_any(FIXTURES / name, "toy", 8, 16, k=3)
    assert record["heads"] == TOP4[:3] and record["scores"] == [0.9, 0.8, 0.7]
    assert record["n_layers"] == 8 and record["n_heads"] == 16 and record["mask"].sum() == 3
    with pytest.raises(headsets.HeadSetError, match=f"{name}: scores need a k"):
        read_any(FIXTURES / name, "toy", 8, 16)


def test_import_errors_name_the_entry(tmp_path):
    (tmp_path / "keyed.json").write_text(json.dumps({"0-1": 0.5, "9-0": 0.2}))
    with pytest.raises(headsets.HeadSetError, match=r"keyed.json: entry '9-0' is out of range for 8 layers"):
        read_any(tmp_path / "keyed.json", "toy", 8, 16, k=1)
    (tmp_path / "text.json").write_text(json.dumps({"0-1": "high"}))
    with pytest.raises(headsets.HeadSetError, match=r"entry '0-1': 'high' is not a per-head score"):
        read_any(tmp_path / "text.json", "toy", 8, 16, k=1)
    with pytest.raises(headsets.HeadSetError, match=r"k = 200 is not an int in 1..128"):
        read_any(FIXTURES / "scores_matrix.npy", "toy", 8, 16, k=200)
    np.save(tmp_path / "flat.npy", np.zeros(128))
    with pytest.raises(headsets.HeadSetError, match=r"flat.npy: a score matrix must be layers x heads"):
        read_any(tmp_path / "flat.npy", "toy", 8, 16, k=3)
    with pytest.raises(headsets.HeadSetError, match=r"scores_matrix.npy: made for 8 layers x 16 heads"):
        read_any(FIXTURES / "scores_matrix.npy", "toy", 36, 32, k=3)
