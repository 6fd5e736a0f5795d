import numpy as np
import pytest

from helpers import headsets


def test_round_trip_best_first(tmp_path):
    scores = np.array([[0.1, 0.7, 0.3], [0.9, 0.2, 0.5]])
    mask = scores > 0.4
    path = headsets.save(tmp_path / "hs.json", model="toy", setting="cm-ref-qsp", selection="flat top-k",
                         mask=mask, scores=scores)
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
