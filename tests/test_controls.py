"""Random head-sets: layer-matched and any-layer controls."""

import re
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats as scipy_stats

from helpers.measures import streams
from helpers.measures.control_schemes import distinct_columns
from helpers.measures.controls import (
    against_controls,
    any_layer_sets,
    layer_matched_count,
    layer_matched_sets,
    layer_quota,
    spill_note,
)
from helpers.measures.stats import rank_p
from helpers.storage import paths
from helpers.studies.controls import tables as study_controls


def _head_set():
    head_set = np.zeros((4, 6), dtype=bool)
    head_set[0, [0, 1, 2]] = True
    head_set[2, 5] = True
    return head_set


def test_layer_matched_sets_keep_counts_per_layer_and_avoid_s():
    head_set = _head_set()
    sets = layer_matched_sets(head_set, 50, seed=3)
    assert sets.shape == (50, 4, 6)
    assert (sets.sum(2) == head_set.sum(1)).all()  # same count in every layer
    assert not (sets & head_set).any()  # never one of S's heads
    assert len({s.tobytes() for s in sets}) > 1  # actually random
    assert (layer_matched_sets(head_set, 50, seed=3) == sets).all()
    assert not (layer_matched_sets(head_set, 50, seed=4) == sets).all()


def test_layer_matched_sets_refuse_a_layer_without_room():
    head_set = np.zeros((2, 4), dtype=bool)
    head_set[1, :3] = True  # 3 in S, 1 outside
    with pytest.raises(ValueError, match=r"layer\(s\) \[1\]"):
        layer_matched_sets(head_set, 2, seed=0)


def test_spill_takes_a_full_layers_excess_from_the_nearest_layers_and_stays_disjoint():
    head_set = np.zeros((4, 4), dtype=bool)
    head_set[:2, :3] = True  # layers 0 and 1: 3 in S, 1 outside each; both excesses of 2 go to layer 2,
    assert spill_note(head_set) == "4 from layer 2"  # the nearest with room (layer 1's tie with 0 and 2: 0 has none)
    sets = layer_matched_sets(head_set, 30, seed=0, spill=True)
    assert (sets.sum((1, 2)) == head_set.sum()).all() and not (sets & head_set).any()
    assert (sets.sum(2) == [1, 1, 4, 0]).all()  # every head outside S in layers 0 and 1, the rest spilled
    with pytest.raises(ValueError, match="S has 10 heads but only 6 heads lie outside"):
        layer_matched_sets(np.eye(4, dtype=bool) | np.tri(4, 4, dtype=bool).T, 1, seed=0, spill=True)


def test_spill_changes_nothing_where_every_layer_has_room():
    head_set = np.zeros((3, 6), dtype=bool)
    head_set[0, :2] = head_set[2, 1:4] = True
    assert spill_note(head_set) == ""
    taken = np.zeros_like(head_set)
    taken[0, 3:] = True  # with 3 more of layer 0's 6 heads excluded, one is left there for S's two
    assert spill_note(head_set, taken) == "1 from layer 1"
    assert (layer_matched_sets(head_set, 20, seed=5, spill=True) == layer_matched_sets(head_set, 20, seed=5)).all()


def _plain_draws(counts: np.ndarray, avoid: np.ndarray, n: int, seed: int) -> np.ndarray:
    """[n, L, H]: the stream's draws without redrawing repeats (each layer's heads by rng.choice, layer by layer)."""
    rng = np.random.default_rng(seed)
    sets = np.zeros((n, *avoid.shape), dtype=bool)
    for draw in range(n):
        for layer in np.nonzero(counts)[0]:
            sets[draw, layer, rng.choice(np.nonzero(~avoid[layer])[0], counts[layer], replace=False)] = True
    return sets


def test_a_set_spilling_into_a_small_layer_draws_distinct_sets_and_the_rank_p_is_over_them():
    head_set = np.zeros((2, 8), dtype=bool)
    head_set[1, :6] = True  # layer 1: 6 of S's heads, 2 outside; its excess of 4 comes from layer 0's 8 heads
    assert spill_note(head_set) == "4 from layer 0"
    counts = layer_quota(head_set, head_set, spill=True)
    assert layer_matched_count(counts, head_set) == 70  # C(8, 4) x C(2, 2)
    plain = _plain_draws(counts, head_set, 20, seed=0)
    assert len(distinct_columns(plain)) < 20  # the stream's plain draws repeat sets here
    sets = layer_matched_sets(head_set, 20, seed=0, spill=True)
    assert (distinct_columns(sets) == np.arange(20)).all()  # every set distinct
    first = distinct_columns(plain)[1:].min() - 1  # the draws before the first repeat are the plain draws
    assert (sets[: first + 1] == plain[: first + 1]).all()
    every = layer_matched_sets(head_set, 100, seed=0, spill=True)  # more draws than distinct sets
    assert len(distinct_columns(every)) == 70 and (distinct_columns(every) == np.arange(70)).all()
    values = np.random.default_rng(1).normal(size=(5, 101))  # [N, 1 + R]: S, then the 100 sets' per-item values
    row = against_controls(values, distinct_columns(every))
    assert row["R"] == 100 and row["distinct"] == 70
    assert row["p"] == rank_p(values[:, 0].mean(), values[:, 1:71].mean(0))


def test_layer_matched_draws_are_the_plain_draws_where_no_set_repeats():
    head_set = np.zeros((6, 16), dtype=bool)
    head_set[[0, 2, 5], :3] = True
    for seed in range(5):
        plain = _plain_draws(head_set.sum(1), head_set, 50, seed)
        assert len(distinct_columns(plain)) == 50
        assert (layer_matched_sets(head_set, 50, seed=seed) == plain).all()


def test_table_15_p_is_the_papers_paired_one_sided_test_and_rank_p_its_own_column(monkeypatch):
    settings = sorted({s for a, b, _ in study_controls.SHARED_HEAD_PAIRS for s in (a, b)})
    rng = np.random.default_rng(0)
    discovered = {s: rng.random((4, 8)) < 0.3 for s in settings}
    per_item = {}

    def fake_ncs(stack):  # per-item values [N, 1 + R]: S one in 3 items ahead of its random sets
        values = np.random.default_rng(int(stack.sum())).normal(0.0, 0.01, size=(12, len(stack)))
        values[::3, 0] += 0.02
        per_item[len(per_item)] = values
        return values

    exp = SimpleNamespace(discovered=discovered, seed=0, mask=lambda stack: stack)
    monkeypatch.setattr(study_controls, "ncs", fake_ncs)
    table = study_controls.shared_heads_table(exp, 20)
    values = per_item[0]  # the first pair's shared part
    paired = scipy_stats.ttest_rel(values[:, 0], values[:, 1:].mean(1), alternative="greater").pvalue
    assert table.loc[0, "shared p"] == pytest.approx(paired, rel=1e-12)
    assert table.loc[0, "shared excess"] == pytest.approx((values[:, 0] - values[:, 1:].mean(1)).mean())
    assert table.loc[0, "shared rank p"] == rank_p(values[:, 0].mean(), values[:, 1:].mean(0))


def test_any_layer_sets_draw_k_heads_from_everywhere():
    sets = any_layer_sets((4, 6), 5, 200, seed=0)
    assert sets.shape == (200, 4, 6) and (sets.sum((1, 2)) == 5).all()
    assert sets.any(0).all()  # 200 draws reach every head
    with pytest.raises(ValueError, match="k=25"):
        any_layer_sets((4, 6), 25, 1, seed=0)


def test_layer_matched_controls_are_one_stream_per_setting_and_r_20_is_a_prefix_of_r_250():
    from helpers.measures.controls import layer_matched_controls

    head_set = _head_set()
    many = layer_matched_controls(head_set, "co-ref-qsp", 250, seed=7)
    assert (layer_matched_controls(head_set, "co-ref-qsp", 20, seed=7) == many[:20]).all()
    assert not (layer_matched_controls(head_set, "cm-ref-qsp", 20, seed=7) == many[:20]).all()
    stream = streams.stream(7, "layer-matched/{setting}", setting="co-ref-qsp")
    assert (layer_matched_sets(head_set, 20, stream) == many[:20]).all()


def test_layer_matched_sets_can_exclude_further_heads():
    head_set, other = _head_set(), np.zeros((4, 6), dtype=bool)
    other[0, [3, 4]] = True  # layer 0 keeps one free head (5) for S's three: too few
    other[2, :4] = True
    with pytest.raises(ValueError, match=r"layer\(s\) \[0\]"):
        layer_matched_sets(head_set, 5, 0, exclude=other)
    other[0, 4] = False  # layer 0: heads 4, 5 free -> still too few for three
    other[0, 3] = False  # now 3, 4, 5: exactly S's count
    sets = layer_matched_sets(head_set, 20, 0, exclude=other)
    assert (sets.sum(2) == head_set.sum(1)).all() and not (sets & (head_set | other)).any()
    assert (sets[:, 2].nonzero()[1] == 4).all()  # layer 2: 5 is in S, 0-3 excluded


def test_any_layer_sets_per_setting_differ_between_settings_and_are_reproducible():
    def draw(setting):
        return any_layer_sets((8, 16), 10, 20, streams.stream(0, "table03/any-layer/{setting}", setting=setting))

    a, b = draw("cm-ord-last"), draw("co-ord-last")
    assert (draw("cm-ord-last") == a).all()
    assert (a.sum((1, 2)) == 10).all() and not (a == b).all()
    assert len({s.tobytes() for s in np.concatenate([a, b])}) == 40


def test_stream_names_in_use_are_unique_and_registered():
    names = streams.stream_names(ks=(2, 4, 10), pairs=[("cm-ord-qsp", "co-ord-qsp"), ("cm-ord-last", "co-ord-last")])
    assert len(names) == len(set(names)) and len(names) > 100
    used = set()
    for notebook in sorted((paths.NOTEBOOKS).glob("0[3-5]_*.py")) + [paths.HELPERS / "measures" / "controls.py"]:
        used |= set(re.findall(r'stream\([^,]+, "([^"]+)"', notebook.read_text()))
    assert used and used <= set(streams.STREAMS), used - set(streams.STREAMS)
    seeds = {streams.stream(0, "table12/random-2k").entropy, streams.stream(0, "table12/random-4k").entropy}
    assert (
        len(seeds) == 2
        and streams.stream(0, "table12/random-2k").entropy != streams.stream(1, "table12/random-2k").entropy
    )
    with pytest.raises(ValueError, match="unknown stream"):
        streams.stream(0, "table99/anything")


def test_attention_matched_sets_take_the_nearest_heads_of_each_layer():
    from helpers.measures.controls import attention_matched_sets

    head_set = _head_set()
    mass = np.tile(np.arange(6.0), (4, 1))  # head h of every layer has mass h
    mass[0, :3] = [10.0, 10.5, 11.0]  # S's heads in layer 0 look at the image most
    mass[0, 5] = 9.0  # nearest outside S in layer 0: 5, then 4, 3
    sets = attention_matched_sets(head_set, mass, 30, seed=1, pool=3)
    assert (sets.sum(2) == head_set.sum(1)).all() and not (sets & head_set).any()
    assert (sets[:, 0] == np.isin(np.arange(6), [3, 4, 5])).all()  # three heads, pool 3: the three nearest
    assert set(np.nonzero(sets[:, 2])[1]) <= {3, 4, 2}  # S's head 5 (mass 5): nearest 4, 3, 2
    nearest_only = attention_matched_sets(head_set, mass, 5, seed=2, pool=1)
    assert (nearest_only[:, 2, 4]).all()
    assert (attention_matched_sets(head_set, mass, 30, seed=1, pool=3) == sets).all()
    with pytest.raises(ValueError, match="mass has shape"):
        attention_matched_sets(head_set, mass[:2], 1, seed=0)


def test_whole_layers_avoid_s_and_prefer_the_middle():
    from helpers.measures.controls import whole_layers

    head_set = _head_set()  # S in layers 0 and 2 of 4
    one = whole_layers(head_set, 1)
    assert one[1].all() and one.sum() == 6  # layers 1 and 3 are free; 1 is nearer the middle
    assert (whole_layers(head_set, 2).any(1) == [False, True, False, True]).all()
    with pytest.raises(ValueError, match="n_layers=5"):
        whole_layers(head_set, 5)


def test_with_controls_puts_s_first():
    from helpers.measures.controls import with_controls

    head_set = _head_set()
    controls = layer_matched_sets(head_set, 3, seed=0)
    stack = with_controls(head_set, controls)
    assert stack.shape == (4, 4, 6) and (stack[0] == head_set).all() and (stack[1:] == controls).all()


def test_generic_damage_sets_and_their_table():
    from helpers.measures.controls import damage_table, generic_damage_sets

    head_set = np.zeros((4, 8), dtype=bool)
    head_set[1, :2] = head_set[2, 5] = True  # k = 3
    first, text = np.arange(32.0).reshape(4, 8), -np.arange(32.0).reshape(4, 8)
    sets = generic_damage_sets(head_set, 3, {"first": first, "text": text}, seed=0)
    assert list(sets) == [
        "discovered",
        "attention sinks",
        "text-heavy heads",
        "whole layers",
        "random 2k",
        "random 4k",
    ]
    assert sets["attention sinks"][3, 5:].all() and sets["attention sinks"].sum() == 3  # the top 3 of `first`
    assert sets["text-heavy heads"][0, :3].all() and sets["text-heavy heads"].sum() == 3
    assert sets["whole layers"].sum() == 8 and not (sets["whole layers"] & head_set).any()
    assert [int(sets[n].sum()) for n in ("random 2k", "random 4k")] == [6, 12]
    # two items; arm probabilities [N, 4] clean and [N, n, 4] masked: set i lowers P(correct) by 0.1 * i
    n = len(sets)
    clean = np.full((2, 4), 0.25)
    clean[:, 0] = 0.7
    masked = np.repeat(clean[:, None], n, axis=1).copy()
    masked[:, :, 0] -= 0.1 * np.arange(n)
    correct = np.zeros(2, dtype=int)
    image_run = {
        f"{arm}_{key}": value
        for arm in ("matched", "mismatched")
        for key, value in (
            ("correct", correct),
            ("p_clean", clean),
            ("p_masked", masked if arm == "matched" else clean[:, None].repeat(n, 1)),
        )
    }
    text_run = {"text_correct": correct, "text_p_clean": clean, "text_p_masked": masked}
    table = damage_table(sets, image_run, text_run)
    np.testing.assert_allclose(table["matched drop"], 0.1 * np.arange(n), atol=1e-12)
    np.testing.assert_allclose(table["NCS"], 0.1 * np.arange(n), atol=1e-12)  # the mismatched arm does not drop
    np.testing.assert_allclose(table["text-arm drop (text hidden)"], 0.1 * np.arange(n), atol=1e-12)
    assert table["overlap with S"].tolist()[0] == 3 and table["heads"].tolist()[:4] == [3, 3, 3, 8]
