import numpy as np
import pandas as pd
import pytest

from helpers.measures import overlap as ov


def test_top_k_picks_largest_and_breaks_ties_by_index():
    scores = np.array([[0.1, 0.9, 0.5], [0.5, 0.2, 0.9]])
    assert ov.top_k(scores, 2).tolist() == [[False, True, False], [False, False, True]]
    # three heads tie at 0.5 for the last slot: the lowest flat index wins
    assert ov.top_k(scores, 3).tolist() == [[False, True, True], [False, False, True]]
    assert ov.top_k_per_layer(scores, 1).tolist() == [[False, True, False], [False, False, True]]
    with pytest.raises(ValueError, match="k=7.*1..6"):
        ov.top_k(scores, 7)


def test_overlap_matrix_and_one_factor_pairs():
    base = np.arange(12, dtype=float).reshape(3, 4)
    scores = {"cm-ord-last": base, "co-ord-last": base.copy(), "cm-ref-last": base[::-1].copy(), "cm-ord-qsp": -base}
    m = ov.overlap_matrix(scores, k=4)
    assert m.loc["cm-ord-last", "co-ord-last"] == 4  # same ranking
    assert m.loc["cm-ord-last", "cm-ref-last"] == 0  # top row vs bottom row
    assert m.loc["cm-ord-last", "cm-ord-qsp"] == 0
    assert np.all(np.diag(m.values) == 4) and (m.values == m.values.T).all()
    pairs = ov.one_factor_pairs(m)
    assert sorted(pairs.factor) == ["corpus", "query", "source"]  # co-ord-last/cm-ref-last differ in two
    assert ov.changed_factor("co-ord-last", "cm-ref-last") is None


def test_split_halves_are_disjoint_and_deterministic():
    s = ov.split_halves(9, 5, seed=3)
    assert s.shape == (5, 2, 4)
    for h1, h2 in s:
        assert not set(h1) & set(h2)
    assert (s == ov.split_halves(9, 5, seed=3)).all()


def test_half_split_overlap_known_values():
    n, heads = 10, 20
    signal = np.linspace(1, 0, heads).reshape(4, 5)
    items = np.broadcast_to(signal, (n, 4, 5)).copy()
    splits = ov.split_halves(n, 7, seed=0)
    assert ov.half_split_overlaps(items, items, 5, splits).tolist() == [5] * 7  # noiseless: perfect ceiling
    flipped = items[:, ::-1, ::-1].copy()  # ranking reversed: the top 5 become the bottom 5
    assert ov.half_split_overlaps(items, flipped, 5, splits).tolist() == [0] * 7
    table = ov.ceiling_table(
        {"cm-ord-last": items, "co-ord-last": items}, [("cm-ord-last", "co-ord-last")], k=5, n_splits=7, seed=0
    )
    row = table.iloc[0]
    assert row["what changes"] == "corpus" and row["shared"] == 5 and row["ceiling"] == 5 and row["fraction"] == 1


def test_noise_lowers_the_ceiling():
    rng = np.random.default_rng(0)
    signal = np.linspace(1, 0, 40).reshape(4, 10)
    noisy = signal + rng.normal(0, 2.0, size=(30, 4, 10))
    clean = signal + rng.normal(0, 0.01, size=(30, 4, 10))
    splits = ov.split_halves(30, 50, seed=1)
    assert (
        ov.half_split_overlaps(noisy, noisy, 8, splits).mean()
        < ov.half_split_overlaps(clean, clean, 8, splits).mean()
        == 8
    )


def test_top_k_curve_and_random_overlap_expectation():
    a = np.arange(20, dtype=float).reshape(4, 5)
    curve = ov.top_k_curve(a, a[::-1].copy(), [5, 10, 20])
    assert curve.shared.tolist() == [0, 0, 20] and curve.fraction.tolist() == [0, 0, 1]
    draws = ov.random_overlaps(np.random.default_rng(0).random((12, 12)), k=12, n_draws=4000, seed=0)
    assert abs(draws.mean() - 12 * 12 / 144) < 0.05  # hypergeometric mean k^2 / N = 1.0
    assert isinstance(curve, pd.DataFrame)


def test_scores_tied_up_to_float_noise_rank_by_head_index_on_every_machine():
    scores = np.array([[0.5, 1e-16, 0.0], [0.0, 2e-16, 0.3]])  # four heads at 0 up to float noise
    for noise in (0.0, 1e-7, -1e-7):
        shifted = scores + noise * np.array([[1, -1, 1], [-1, 1, 1]])
        np.testing.assert_array_equal(ov.top_k(shifted, 4), [[True, True, True], [False, False, True]])
    assert ov.ranking([3.0, 1.0, 1.0 + 1e-9, np.inf], descending=False).tolist() == [1, 2, 0, 3]
