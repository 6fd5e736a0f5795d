"""The field's control schemes (helpers/measures/control_schemes.py), their verdict table and the card's line."""

import numpy as np
import pandas as pd
import pytest

from helpers import sizes
from helpers.measures import control_schemes as cs
from helpers.measures import streams, verdicts
from helpers.measures.names import CONTROL_SCHEMES
from helpers.runner import params
from helpers.studies import findings


def _head_set():
    head_set = np.zeros((6, 4), dtype=bool)  # 6 layers x 4 heads; bands (thirds) = layers 0-1, 2-3, 4-5
    head_set[0, [0, 1]] = True
    head_set[3, 2] = True
    head_set[5, [0, 3]] = True
    return head_set  # k = 5


def test_the_registry_names_every_scheme_and_its_stream():
    assert cs.SCHEMES == CONTROL_SCHEMES and set(cs.STREAM_OF) == set(cs.SCHEMES) == set(cs.SOURCE)
    assert set(cs.STREAM_OF.values()) <= set(streams.STREAMS)
    names = streams.stream_names(draws=range(sizes.UNSEEDED_SEEDS))
    assert len(names) == len(set(names))
    assert "control-schemes/unseeded/co-ref-qsp/seed19" in names
    with pytest.raises(ValueError, match=r"'bottom7'.*known: layer-matched, any-layer, bottom5"):
        cs.check_scheme("bottom7")
    with pytest.raises(ValueError, match="'bottom7'"):
        cs.scheme_sets("bottom7", _head_set(), "co-ref-qsp", 2, 0)


def test_per_layer_uniform_masks_each_layers_row_of_its_own_draw_so_the_size_varies_around_k():
    head_set = _head_set()  # k = 5 of 6 x 4 heads
    sets = cs.per_layer_uniform_sets(head_set, 4000, seed=0)
    sizes_drawn = sets.sum((1, 2))
    # each layer's row of 5 distinct cells of 24: hypergeometric, mean 5 x 4 / 24; six layers: mean 5
    assert abs(sizes_drawn.mean() - 5.0) < 0.1 and sizes_drawn.min() < 5 < sizes_drawn.max()
    variance = 6 * 5 * (4 / 24) * (20 / 24) * (19 / 23)  # six independent hypergeometric rows
    assert abs(sizes_drawn.var() - variance) < 0.15
    assert (sets & head_set).any()  # S's heads are not excluded
    assert (cs.scheme_sets("per-layer-uniform", head_set, "co-ref-qsp", 3, 0) == cs.scheme_sets(
        "per-layer-uniform", head_set, "co-ref-qsp", 3, 0)).all()  # fmt: skip


def test_bottom_q_draws_k_heads_from_the_lowest_scores_outside_s():
    head_set = _head_set()
    scores = np.arange(24.0).reshape(6, 4)  # head (l, h) scores 4l + h
    scores[0, [0, 1]] = -1.0  # S's layer-0 heads are among the lowest: excluded all the same
    # q = 50: the cutoff is the median (11.5 with S's two -1's), pool = scores 2-11 outside S
    pool = (scores <= np.percentile(scores, 50)) & ~head_set
    assert pool.sum() == 10
    sets = cs.bottom_q_sets(head_set, scores, 40, seed=0, q=50)
    assert sets.shape == (40, 6, 4) and (sets.sum((1, 2)) == 5).all()
    assert not (sets & ~pool).any() and not (sets & head_set).any()
    assert sets.any(0).sum() == 10  # 40 draws reach the whole pool
    # q = 15 of scores 0-23: cutoff 3.45, the pool (0-3 minus S's 0, 1) holds 2 heads < k: every draw is that pool
    small = cs.bottom_q_sets(head_set, np.arange(24.0).reshape(6, 4), 3, seed=0, q=15)
    assert (small.sum((1, 2)) == 2).all() and (small == small[0]).all()
    assert small[0, 0, 2] and small[0, 0, 3]


def test_bottom_q_refuses_bad_scores_and_shares():
    head_set, scores = _head_set(), np.arange(24.0).reshape(6, 4)
    with pytest.raises(ValueError, match="scores have shape"):
        cs.bottom_q_sets(head_set, scores[:3], 1, 0)
    bad = scores.copy()
    bad[2, 2] = np.nan
    with pytest.raises(ValueError, match="1 non-finite"):
        cs.bottom_q_sets(head_set, bad, 1, 0)
    with pytest.raises(ValueError, match="q=0"):
        cs.bottom_q_sets(head_set, scores, 1, 0, q=0)
    only_s = np.full((6, 4), 10.0)
    only_s[head_set] = 0.0  # the bottom 5% is all S's
    with pytest.raises(ValueError, match="no head outside S"):
        cs.bottom_q_sets(head_set, only_s, 1, 0)
    with pytest.raises(ValueError, match="needs the discovery scores"):
        cs.scheme_sets("bottom5", head_set, "co-ref-qsp", 2, 0)


def test_same_band_sets_keep_the_count_per_third_of_the_layers():
    assert cs.layer_bands(6).tolist() == [0, 0, 1, 1, 2, 2]
    assert cs.layer_bands(8).tolist() == [0, 0, 0, 1, 1, 1, 2, 2]
    assert np.bincount(cs.layer_bands(32)).tolist() == [11, 11, 10]
    head_set = _head_set()
    sets = cs.same_band_sets(head_set, 300, seed=1)
    bands = cs.layer_bands(6)
    for band, count in enumerate([2, 1, 2]):
        assert (sets[:, bands == band].sum((1, 2)) == count).all()
    assert not (sets & head_set).any()
    assert (sets.sum(2) != head_set.sum(1)).any()  # layers within a band vary: not layer-matched
    assert sets.any(0).sum() == 24 - 5  # every head outside S is drawn at some point
    crowded = np.zeros((6, 4), dtype=bool)
    crowded[4:] = True
    crowded[4, 0] = False  # band 2: 7 of its 8 heads in S, one outside
    with pytest.raises(ValueError, match=r"layer\(s\) \[2\]"):  # the band's row in the primitive
        cs.same_band_sets(crowded, 1, 0)
    with pytest.raises(ValueError, match="n_bands=7"):
        cs.layer_bands(6, 7)


def test_uniform_sets_exclude_s_or_may_overlap_it():
    head_set = np.zeros((4, 4), dtype=bool)
    head_set[:2] = True  # k = 8 of 16
    excluding = cs.uniform_sets(head_set, 50, seed=2, exclude_set=True)
    assert (excluding.sum((1, 2)) == 8).all() and (excluding == ~head_set).all()  # the 8 heads outside S
    overlapping = cs.uniform_sets(head_set, 50, seed=2, exclude_set=False)
    assert (overlapping.sum((1, 2)) == 8).all() and (overlapping & head_set).any((1, 2)).all()
    assert overlapping.any(0).all()
    with pytest.raises(ValueError, match=r"layer\(s\) \[0\]"):  # k > the heads outside S
        cs.uniform_sets(np.ones((2, 2), dtype=bool) & (np.arange(4).reshape(2, 2) < 3), 1, 0, exclude_set=True)


def test_every_scheme_is_deterministic_by_seed_and_setting_and_sized_as_s():
    head_set, scores = _head_set(), np.arange(24.0).reshape(6, 4)[::-1].copy()
    for scheme in cs.SCHEMES[:-1]:
        a = cs.scheme_sets(scheme, head_set, "co-ref-qsp", 10, 0, scores)
        assert a.shape == (10, 6, 4)
        assert (cs.scheme_sets(scheme, head_set, "co-ref-qsp", 10, 0, scores) == a).all()
        assert (cs.scheme_sets(scheme, head_set, "co-ref-qsp", 4, 0, scores) == a[:4]).all()  # a prefix
        if scheme != "bottom5":  # bottom5's pool holds 2 heads here: one set whatever the seed
            assert (a.sum((1, 2)) == 5).all() or scheme == "per-layer-uniform"  # its size varies around k
            assert not (cs.scheme_sets(scheme, head_set, "co-ref-qsp", 10, 1, scores) == a).all()
            assert not (cs.scheme_sets(scheme, head_set, "cm-ref-qsp", 10, 0, scores) == a).all()
    stream = cs.scheme_stream("same-band", 0, "co-ref-qsp")
    assert (cs.scheme_sets("same-band", head_set, "co-ref-qsp", 3, 0) == cs.same_band_sets(head_set, 3, stream)).all()
    from helpers.measures.controls import layer_matched_controls

    expected = layer_matched_controls(head_set, "co-ref-qsp", 3, 0)
    assert (cs.scheme_sets("layer-matched", head_set, "co-ref-qsp", 3, 0) == expected).all()


def test_unseeded_sets_are_one_overlapping_draw_per_seed():
    head_set = _head_set()
    sets = cs.unseeded_sets(head_set, "co-ref-qsp", 2, seed=0)
    assert sets.shape == (sizes.UNSEEDED_SEEDS, 2, 6, 4) and (sets.sum((2, 3)) == 5).all()
    assert len({s.tobytes() for s in sets}) == sizes.UNSEEDED_SEEDS  # the seeds draw differently
    third = cs.uniform_sets(head_set, 2, cs.scheme_stream("unseeded", 0, "co-ref-qsp", 3), exclude_set=False)
    assert (sets[3] == third).all()
    assert (cs.unseeded_sets(head_set, "co-ref-qsp", 2, seed=0, n_seeds=5) == sets[:5]).all()
    with pytest.raises(ValueError, match="unseeded_sets"):
        cs.scheme_sets("unseeded", head_set, "co-ref-qsp", 2, 0)
    with pytest.raises(ValueError, match="n_seeds=0"):
        cs.unseeded_sets(head_set, "co-ref-qsp", 2, 0, n_seeds=0)


def test_unique_sets_run_each_distinct_set_once():
    head_set = _head_set()
    other = cs.uniform_sets(head_set, 2, 0, exclude_set=True)
    stack = np.stack([head_set, other[0], other[0], head_set, other[1]])
    unique, inverse = cs.unique_sets(stack)
    assert len(unique) == 3 and (unique[0] == head_set).all() and inverse.tolist() == [0, 1, 1, 0, 2]
    assert (unique[inverse] == stack).all()


def _scheme_table():
    """Three settings x three schemes; R = 20 and 3 settings: the Holm floor is 3 / 21 = .143."""
    rows = []
    for scheme, ps in {"layer-matched": [0.048, 0.5, 0.048], "bottom5": [0.048, 0.048, 0.048],
                       "same-band": [0.048, 0.5, 0.048]}.items():  # fmt: skip
        for setting, p in zip(("a", "b", "c"), ps):
            rows.append({"scheme": scheme, "setting": setting, "R": 20, "S": 0.3, "random mean": 0.1, "p": p,
                         "z": 3.0})  # fmt: skip
    table = pd.DataFrame(rows)
    table.loc[(table.scheme == "same-band") & (table.setting == "c"), "random mean"] = 0.295  # effect < 0.01
    return table


def test_a_pool_smaller_than_k_is_one_distinct_set_and_never_beats_random():
    sets = cs.bottom_q_sets(np.eye(4, dtype=bool), np.arange(16.0).reshape(4, 4), 20, 0, q=20.0)
    np.testing.assert_array_equal(cs.distinct_columns(sets), [0])  # the pool, 20 times
    table = _scheme_table().assign(distinct=20)
    table.loc[table.scheme == "bottom5", "distinct"] = 1
    judged = verdicts.scheme_verdicts(table)
    bottom5 = judged[judged.scheme == "bottom5"]
    assert not bottom5["significant"].any() and set(bottom5["verdict"]) == {verdicts.NOT_INTERPRETABLE}
    sentence = findings.scheme_changes(judged)
    assert "as few as 1 distinct set(s) of R drawn: rank p no lower than 0.500" in sentence
    # a call that cannot be made is printed as such, not as a "no"
    assert "call of 3 setting(s): a (not interpretable), b (not interpretable), c (not interpretable)" in sentence


def test_scheme_verdicts_adjust_within_a_scheme_and_call_unadjusted():
    table = verdicts.scheme_verdicts(_scheme_table())
    lm = table[table.scheme == "layer-matched"]
    np.testing.assert_allclose(lm["p Holm"], [0.144, 0.5, 0.144])  # step-down: 3 x .048, then the max
    assert set(table["verdict"]) == {verdicts.NOT_INTERPRETABLE}  # floor .143 > .05 at R = 20, 3 sets
    assert lm["significant"].tolist() == [True, False, True]
    assert table[table.scheme == "bottom5"]["significant"].all()
    assert table[table.scheme == "same-band"]["significant"].tolist() == [True, False, False]


def test_the_sentence_names_the_settings_a_scheme_changes():
    table = verdicts.scheme_verdicts(_scheme_table())
    sentence = findings.scheme_changes(table)
    assert "Against layer-matched random sets (R = 20), 3 of 3 settings not interpretable after Holm" in sentence
    assert "2 of 3 reach rank p <= 0.05" in sentence
    assert "bottom5 changes the unadjusted call of 1 setting(s): b (beats random)" in sentence
    assert "same-band changes the unadjusted call of 1 setting(s): c (within random)" in sentence
    unseeded = table[table.scheme == "layer-matched"].assign(scheme="unseeded", seeds=20, **{"R per seed": 20})
    unseeded["seeds beating"], unseeded["seeds not interpretable"] = [20, 0, 7], 0
    sentence = findings.scheme_changes(pd.concat([table, unseeded], ignore_index=True))
    assert "S beats random at every seed in 1 settings, at none in 1, and the call depends on the seed in 1 (c)." in (
        sentence
    )
    one_set = unseeded.assign(**{"R per seed": 1, "seeds beating": 0, "seeds not interpretable": 20})
    sentence = findings.scheme_changes(pd.concat([table, one_set], ignore_index=True))
    assert "not interpretable at every seed in every setting, since 1 set(s) allow no rank p below 0.500" in sentence
    small = _scheme_table().assign(R=3)
    small.loc[small.scheme == "bottom5", "R"] = 20  # a scheme of more sets is named with its R
    sentence = findings.scheme_changes(verdicts.scheme_verdicts(small))
    assert "(at R = 3 no rank p can: its floor is 0.250)" in sentence and "bottom5 (R = 20) changes" in sentence


def test_an_unknown_scheme_is_refused_by_the_card_and_the_parameters():
    from helpers import protocol

    with pytest.raises(SystemExit, match=r"^unknown control scheme 'bottom7'; known: layer-matched"):
        protocol.main(["--model", "toy", "--heads", "co-ref-qsp", "--controls", "bottom7"])
    with pytest.raises(params.ParameterError, match="controls='bottom7'"):
        params.validate({"controls": "bottom7"})
    assert params.validate({"controls": "bottom5"}).controls == "bottom5"


def test_the_card_line_and_its_forward_copies():
    from helpers.sizes import CARD_SIZES, card_forward_copies
    from helpers.studies.protocol import scheme_verdict

    plain = card_forward_copies(CARD_SIZES["default"], 2)
    with_line = card_forward_copies(CARD_SIZES["default"], 2, "bottom5")
    assert set(with_line) - set(plain) == {"NCS vs bottom5 (S + 20, two arms)"}
    assert with_line["NCS vs bottom5 (S + 20, two arms)"] == 2 * 21 * 2 * 50
    assert (
        card_forward_copies(CARD_SIZES["default"], 1, "unseeded")["NCS vs unseeded (S + 20, two arms)"] == 21 * 2 * 50
    )
    missing = scheme_verdict("mine", "bottom5", None, 1, [])
    assert missing.verdict == verdicts.NOT_RUN and "discovery score" in missing.reason
    row = {"S": 0.4, "random mean": 0.1, "p": 1 / 101, "p Holm": 1 / 101, "z": 5.0, "R": 100}
    seeds = {"seeds": 20, "seeds beating": 0, "seeds not interpretable": 20}
    schemes = pd.DataFrame([{"head-set": "mine", **row, **seeds}]).set_index("head-set")
    line = scheme_verdict("mine", "unseeded", schemes, 1, [])
    assert line.check == "NCS vs unseeded" and line.verdict == verdicts.PASS
    assert line.number.endswith("each seed's one set alone: beats random at 0 of 20 seeds, not interpretable at 20")
    blocked = scheme_verdict("mine", "bottom5", schemes, 1, verdicts.audit_verdicts({"matched": 0.5}))
    assert blocked.verdict == verdicts.NOT_INTERPRETABLE and "matched" in blocked.reason


class _Masking:
    """A stand-in for Evaluation.mask: per item, the masked set's matched drop grows with its heads in layer 0 (plus
    item noise), the mismatched arm is untouched; records the size of every stack it runs."""

    def __init__(self, n_items: int = 12):
        self.n_items, self.stacks = n_items, []
        self.noise = np.random.default_rng(3).uniform(0, 0.01, n_items)

    def mask(self, sets: np.ndarray) -> dict:
        self.stacks.append(len(sets))
        n = len(sets)
        clean = np.tile([0.9, 0.05, 0.03, 0.02], (self.n_items, 1))  # [N, 4]: the correct letter is the first
        masked = np.repeat(clean[:, None], n, axis=1).copy()  # [N, n, 4]
        masked[:, :, 0] -= 0.1 * sets[:, 0].sum(1)[None] + self.noise[:, None]
        correct = np.zeros(self.n_items, dtype=int)
        return {
            "matched_correct": correct,
            "mismatched_correct": correct,
            "matched_p_clean": clean,
            "mismatched_p_clean": clean,
            "matched_p_masked": masked,
            "mismatched_p_masked": np.repeat(clean[:, None], n, axis=1),
        }


def test_notebook_05_and_the_card_judge_a_scheme_by_the_one_computation():
    from types import SimpleNamespace

    from helpers.studies.controls.schemes import control_scheme_table, scheme_run
    from helpers.studies.protocol.card import Protocol
    from helpers.studies.protocol.head_sets import HeadSet

    head_set, scores = _head_set(), np.arange(24, dtype=float).reshape(6, 4)[[1, 0, 2, 3, 4, 5]]  # lowest: layer 1
    evaluation = _Masking()
    small_pool = scheme_run(evaluation, "bottom5", head_set, "co-ref-qsp", 20, 0, scores)
    assert evaluation.stacks == [2] and small_pool.values.shape == (12, 21)  # S and the pool, each run once
    assert list(small_pool.distinct) == [0] and small_pool.heads == 2.0
    table, points = control_scheme_table(evaluation, {"co-ref-qsp": head_set}, {"co-ref-qsp": scores}, 20, 1, 0)
    assert list(table.scheme) == list(cs.SCHEMES)
    assert len(points) == 21 * (len(cs.SCHEMES) - 1) + 1 + sizes.UNSEEDED_SEEDS  # S and its sets, per scheme
    card = object.__new__(Protocol)  # the card's state that its control_scheme line reads, without a model
    card.controls, card.sizes, card.params = "unseeded", {"n_random": 20}, SimpleNamespace(seed=0)
    card.mask = evaluation.mask
    line = card.control_scheme(HeadSet("co-ref-qsp", None, {"mask": head_set}))
    row = table.set_index("scheme").loc["unseeded"]
    for column in ("heads", "R", "distinct", "S", "random mean", "p", "z", "seeds", "seeds beating"):
        assert line[column] == row[column], column
    assert line["p floor"] == 1 / (row["distinct"] + 1) and "effect" in line
