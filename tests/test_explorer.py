"""The explorer's panels return figures with the expected content; the widget redraws on its controls."""

import numpy as np
import pytest
from matplotlib.patches import Rectangle

from helpers.figures.explorer import (
    overlap_codes,
    plot_attention_overlay,
    plot_overlap_map,
    plot_random_histograms,
    plot_score_map,
)
from helpers.measures.overlap import top_k
from helpers.storage import paths
from helpers.studies.explorer import Explorer, ExplorerData, run_folders

SCORES = np.arange(24, dtype=float).reshape(4, 6) / 24  # [L, H]


def test_score_map_shows_the_scores_and_outlines_the_set():
    head_set = top_k(SCORES, 5)
    fig = plot_score_map(SCORES, head_set, "demo")
    ax = fig.axes[0]
    assert np.array_equal(ax.images[0].get_array(), SCORES)
    outlined = [(p.get_x() + 0.5, p.get_y() + 0.5) for p in ax.patches if isinstance(p, Rectangle)]
    assert sorted((int(y), int(x)) for x, y in outlined) == sorted(zip(*np.nonzero(head_set)))
    assert "5 heads outlined" in ax.get_title()


def test_overlap_map_codes_and_count():
    a, b = top_k(SCORES, 5), top_k(-SCORES, 5) | top_k(SCORES, 2)
    codes = overlap_codes(a, b)
    assert (codes == 3).sum() == 2 and (codes == 1).sum() == 3 and (codes == 2).sum() == 5
    fig = plot_overlap_map(a, b, "A", "B")
    assert np.array_equal(fig.axes[0].images[0].get_array(), codes)
    assert "2 of 5 heads shared" in fig.axes[0].get_title()


def test_random_histograms_mark_s_and_its_rank_p():
    random = {"NCS": np.linspace(0, 0.1, 20), "CERS": np.linspace(-0.2, 0.2, 20)}
    fig = plot_random_histograms({"NCS": 0.5, "CERS": 0.0}, random, "demo")
    ncs_ax, cers_ax = fig.axes
    assert ncs_ax.lines[0].get_xdata()[0] == 0.5 and "rank p 0.048" in ncs_ax.get_title()
    assert "rank p 0.524" in cers_ax.get_title()  # (1 + 10) / 21
    assert sum(p.get_height() for p in ncs_ax.patches) == 20


@pytest.fixture(scope="module")
def data():
    return ExplorerData("toy", n_items=4, n_random=3)


def test_attention_overlay_of_a_toy_strip(data):
    view = data.attention("cm-ref-qsp", 0)
    n_layers, n_heads, rows, cols = view["attention"].shape
    assert (n_layers, n_heads, rows, cols) == (8, 16, 4, 6)  # 2 x 2 tokens per 64 px panel of a 3 x 2 strip
    assert np.all(view["attention"] >= 0) and np.all(view["attention"].sum((2, 3)) <= 1 + 1e-5)
    assert view["query"].sum() >= 1 and len(view["tokens"]) == len(view["query"])
    fig = plot_attention_overlay(view["item"], view["attention"][5, 2], view["tokens"], view["query"], (5, 2))
    left, right = fig.axes[0], fig.axes[1]
    assert np.allclose(left.images[1].get_array(), view["attention"][5, 2])
    red = [t.get_text() for t in right.texts if t.get_color() == "red"]
    assert len(red) == view["query"].sum()


def test_widget_redraws_the_score_map_on_setting_and_k(data):
    runs = run_folders()
    assert "published (data/)" in runs and runs["published (data/)"] == paths.DATA
    explorer = Explorer(data, {"published (data/)": paths.DATA})
    first = explorer.score_map.value
    assert first[:4] == b"\x89PNG" and explorer.k.value == 11
    explorer.setting.value = "co-ref-qsp"
    assert explorer.score_map.value != first
    second = explorer.score_map.value
    explorer.k.value = 5
    assert explorer.score_map.value != second and len(explorer.head.options) == 5
    assert explorer.overlay.value[:4] == b"\x89PNG" and explorer.overlap.value[:4] == b"\x89PNG"
    assert explorer.histograms.layout.display == "none"  # hidden until the button computes it
