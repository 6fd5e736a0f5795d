"""The paper's statistics against values worked out by hand."""

import numpy as np
import pytest

from helpers.measures import stats


@pytest.mark.parametrize("R, floor", [(20, 0.048), (100, 0.010), (250, 0.004)])
def test_rank_p_floor_matches_the_paper(R, floor):
    assert round(stats.rank_p(1.0, np.zeros(R)), 3) == floor


def test_rank_p_counts_ties_and_larger_random_values():
    random = np.array([0.1, 0.5, 0.5, 0.9])
    assert stats.rank_p(0.5, random) == pytest.approx(4 / 5)  # 1 + three sets >= .5
    assert stats.rank_p(0.95, random) == pytest.approx(1 / 5)
    with pytest.raises(ValueError, match="finite"):
        stats.rank_p(0.5, np.array([np.nan]))


def test_holm_step_down_example():
    # sorted: .005*4 = .02, .01*3 = .03, .03*2 = .06, .04*1 = .04 -> monotone .06
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([0.5, 0.9]).max() == 1.0


def test_z_score_and_t_interval_by_hand():
    assert stats.z_score(5.0, np.array([1.0, 2.0, 3.0])) == (pytest.approx(3.0), False)  # (5 - 2) / 1
    mean, low, high = stats.t_interval(np.array([1.0, 2.0, 3.0, 4.0, 5.0]))
    half = 2.776445 * np.sqrt(2.5) / np.sqrt(5)  # t(.975, 4) * sd / sqrt(n)
    assert (mean, low, high) == pytest.approx((3.0, 3.0 - half, 3.0 + half), abs=1e-5)
    assert np.isnan(stats.t_interval(np.array([1.0]))[1])


def test_bootstrap_interval_matches_the_t_interval_on_large_normal_samples():
    values = np.random.default_rng(0).normal(0.3, 1.0, 2000)
    value, low, high = stats.bootstrap_interval(np.mean, (values,), n_boot=2000, seed=1)
    _, t_low, t_high = stats.t_interval(values)
    assert value == pytest.approx(values.mean())
    assert low == pytest.approx(t_low, abs=0.01) and high == pytest.approx(t_high, abs=0.01)
    assert stats.bootstrap_interval(np.mean, (np.full(10, 0.25),), 100) == pytest.approx((0.25, 0.25, 0.25))
    with pytest.raises(ValueError, match="first axis"):
        stats.bootstrap_interval(np.mean, (np.zeros(3), np.zeros(4)))


def test_paired_t_by_hand():
    a, b = np.array([1.0, 2.0, 4.0]), np.array([0.0, 1.0, 1.0])
    diff, p = stats.paired_t(a, b)  # d = 1, 1, 3: mean 5/3, sd 1.1547, t = 2.5
    assert diff == pytest.approx(5 / 3)
    assert p == pytest.approx(0.1296, abs=1e-3)  # two-sided, 2 df


def test_against_random_row():
    rng = np.random.default_rng(0)
    random = rng.normal(0.0, 0.01, (50, 20))  # [N, R]
    row = stats.against_random(np.full(50, 0.2), random)
    assert row["S"] == pytest.approx(0.2) and row["p"] == pytest.approx(1 / 21)
    assert row["random mean"] == pytest.approx(random.mean())
    assert row["z"] == pytest.approx((0.2 - random.mean(0).mean()) / random.mean(0).std(ddof=1))
    assert row["S low"] == pytest.approx(0.2) and row["S high"] == pytest.approx(0.2)  # t-interval of a constant
    assert row["random min"] <= row["random mean"] <= row["random max"]
    assert row["R"] == 20 and row["interval"] == "t" and not row["z capped"]
    with pytest.raises(ValueError, match=r"\[N, R\]"):
        stats.against_random(random[:10, 0], random)


def test_excess_over_random_by_hand():
    discovered = np.array([0.3, 0.5, 0.4])
    random = np.array([[0.0, 0.2], [0.1, 0.1], [0.2, 0.0]])  # per-item random means .1 .1 .1
    excess, p = stats.excess_over_random(discovered, random)  # excess .2 .4 .3: mean .3, sd .1
    assert excess == pytest.approx(0.3)
    assert p == pytest.approx(0.01755, abs=1e-4)  # t = .3 / (.1 / sqrt 3) = 5.196, 2 df, one-sided
    assert stats.excess_over_random(-discovered, random)[1] > 0.95
    with pytest.raises(ValueError, match=r"\[N, R\]"):
        stats.excess_over_random(discovered, random[:2])


def test_spearman_by_hand():
    assert stats.spearman([1, 2, 3, 4], [10, 20, 25, 100]) == pytest.approx(1.0)
    # ranks (1, 2, 3, 4) and (2, 1, 4, 3): d^2 = 4, rho = 1 - 6 * 4 / (4 * 15) = 0.6
    assert stats.spearman([1, 2, 3, 4], [2, 1, 4, 3]) == pytest.approx(0.6)
    with pytest.raises(ValueError, match="same length"):
        stats.spearman([1, 2, 3], [1, 2])


def test_holm_with_mixed_r_gives_the_papers_0048():
    # Table 3's NCS p's: the two ref-qsp sets at their floor among R = 250 (1 / 251), the others at R = 20
    p = [1 / 251, 1 / 251] + [1 / 21] * 4 + [0.38, 1.0, 0.43, 0.24, 0.33, 1.0]
    adjusted = stats.holm(p)
    assert adjusted[:2] == pytest.approx([12 / 251, 12 / 251])  # = 0.0478, the paper's "Holm-adjusted p = 0.048"
    assert round(adjusted[0], 3) == 0.048
    assert stats.holm([1 / 21] * 12).min() == pytest.approx(12 / 21)  # all at R = 20: never below 0.571


def test_rank_p_counts_random_sets_equal_to_s_as_ties():
    rng = np.random.default_rng(3)
    s = rng.normal(0.1, 0.05, 400)
    values = np.column_stack([s, rng.normal(0.0, 0.05, (400, 18)), s, s])  # S, 18 lower sets, two copies of S
    values = values[:, [0, 19, *range(1, 19), 20]]  # the copies in other positions: another summation order
    assert stats.against_random(values[:, 0], values[:, 1:])["p"] == pytest.approx(3 / 21)
    assert stats.rank_p(0.3, np.array([0.3 - 1e-7, 0.1])) == pytest.approx(2 / 3)  # within the tolerance
    assert stats.rank_p(0.3, np.array([0.3 - 4e-4, 0.1])) == pytest.approx(2 / 3)  # prints as 0.300 too
    assert stats.rank_p(0.3, np.array([0.3 - 1e-3, 0.1])) == pytest.approx(1 / 3)


def test_a_draw_that_repeats_sets_is_ranked_over_its_distinct_sets():
    rng = np.random.default_rng(4)
    s, pool = rng.normal(0.5, 0.01, 30), rng.normal(0.0, 0.01, (30, 1))
    repeated = np.repeat(pool, 20, axis=1)  # one set drawn 20 times (a bottom-5% pool smaller than k)
    assert stats.against_random(s, repeated)["p"] == pytest.approx(1 / 21)  # what counting copies would claim
    row = stats.against_random(s, repeated, distinct=[0])
    assert (row["p"], row["R"], row["distinct"]) == (pytest.approx(0.5), 20, 1)
    assert np.isnan(row["z"])  # one distinct set has no SD


def test_printed_numbers_survive_a_1e_7_perturbation():
    rng = np.random.default_rng(5)
    s = np.r_[np.zeros(10), rng.uniform(0, 1, 10)][:, None]  # S at 0.000 tied with random sets at 0.000
    random = np.hstack([np.zeros((20, 12)), rng.uniform(-0.2, 0.2, (20, 8))])
    for discovered in (s[:10, 0], s[10:, 0]):
        rows = [
            stats.against_random(discovered + shift, random[: len(discovered)] - shift)
            for shift in (0.0, 1e-7, 2e-7)  # upward: a -1e-7 prints as -0.000, a sign report.table keeps
        ]
        printed = [(f"{r['S']:.3f}", f"{r['p']:.3f}", f"{r['z']:.1f}", f"{r['random mean']:.3f}") for r in rows]
        assert printed[0] == printed[1] == printed[2]


def test_float32_rounding_is_no_effect():
    # a toy that answers with P = 1: S and its random sets differ by float32 rounding only
    s, random = 3e-8, np.array([1e-8, -2e-8, 0.0, 5e-9])
    assert stats.rank_p(s, random) == 1.0
    assert stats.z_score(s, random) == (0.0, False)


def test_z_is_capped_and_flagged_where_the_random_sd_is_about_0():
    assert stats.z_score(0.7, np.array([0.0003, 0.0003 + 1e-9, 0.0003])) == (stats.Z_CAP, True)
    assert stats.z_score(0.7, np.full(5, 0.0003)) == (stats.Z_CAP, True)
    assert stats.z_score(-0.7, np.zeros(5)) == (-stats.Z_CAP, True)
    assert stats.z_score(0.0, np.zeros(5)) == (0.0, False)
    row = stats.against_random(np.full(10, 0.5), np.full((10, 4), 0.001))
    assert row["z"] == stats.Z_CAP and row["z capped"] and row["random sd"] == 0.0
