"""Steering (CERS) and necessity (NCS) on the shipped toy model: the interventions, their scores and
their caches."""

import numpy as np
import pytest
import torch

from helpers.engine import HIDE, build_batch, load_model
from helpers.engine.mcq import letter_probs, letter_probs_under, row_selection
from helpers.measures import necessity, steering
from helpers.stimuli.corpora import grid_items, load_corpus, single_image_items
from helpers.storage.cache import ResultCache

SEED = 5


@pytest.fixture(scope="module")
def lm(two_threads):
    return load_model("toy")


@pytest.fixture(scope="module")
def sets(lm):
    """[3, L, H]: no head, every head, every head of the upper half of the layers."""
    n_layers, n_heads = len(lm.adapter.candidate_layers), lm.adapter.n_heads
    out = np.zeros((3, n_layers, n_heads), dtype=bool)
    out[1] = True
    out[2, n_layers // 2 :] = True
    return out


def test_an_empty_head_set_leaves_the_probabilities_clean_and_chunking_changes_nothing(lm, sets):
    item = grid_items(load_corpus("co"), 1, SEED)[0]
    batch = build_batch(lm.processor, [item])
    keys = steering.cell_keys(lm, batch, item, item.correct)
    assert keys.sum() >= 1 and not (keys & ~batch.image_mask).any()  # the cell's keys are image tokens
    heads = torch.as_tensor(sets)
    together = letter_probs_under(lm, batch, heads, keys, 10.0)
    one_by_one = letter_probs_under(lm, batch, heads, keys, 10.0, sets_per_forward=1)
    assert torch.allclose(together, one_by_one, atol=1e-5)
    assert torch.allclose(together[0], letter_probs(lm.model, lm.processor, batch)[0], atol=1e-5)
    assert together[1:].sub(together[0]).abs().max() > 0.05  # intervening on heads does something
    assert row_selection(batch, "last").sum() == 1 and row_selection(batch, "all") == "all"
    assert (row_selection(batch, "image") == batch.image_mask).all()
    with pytest.raises(ValueError, match="row group"):
        row_selection(batch, "question")
    with pytest.raises(ValueError, match="one item"):
        letter_probs_under(lm, build_batch(lm.processor, [item, item]), heads, keys, 1.0)


def test_hiding_the_image_from_every_head_makes_the_matched_answer_a_guess(lm, sets):
    corpus = load_corpus("co")
    run = {}
    for arm in necessity.ARMS:
        items = single_image_items(corpus, 6, SEED, arm)
        run.update({f"{arm}_{k}": v for k, v in necessity.mask_items(lm, items, sets).items()})
    scores = necessity.ncs(run).mean(0)  # [3]
    assert scores[0] == pytest.approx(0.0, abs=1e-5)
    assert scores[1] > 0.5  # clean ~1.00, masked ~0.28
    mismatched = necessity.drop(run, "mismatched")[:, 1]  # the image never helped there: P moves about chance
    assert abs(mismatched.mean()) < 0.02 and np.abs(mismatched).max() < 0.1
    masked = np.take_along_axis(run["matched_p_masked"][:, 1], run["matched_correct"][:, None], 1)
    assert masked.max() < 0.45


def test_hiding_the_target_cell_costs_more_than_hiding_a_distractor(lm, sets):
    items = grid_items(load_corpus("co"), 6, SEED)
    distractors = steering.distractor_cells(items, SEED)
    assert all(d != item.correct for d, item in zip(distractors, items))
    run = steering.steer_items(lm, items, distractors, sets, HIDE)
    grid = steering.ncs_grid(run).mean(0)  # [3]
    assert grid[0] == pytest.approx(0.0, abs=1e-5) and grid[1] > 0.5


def test_score_arithmetic_on_known_probabilities():
    p_to_c = np.array([[[0.1, 0.7, 0.1, 0.1]]])  # [N=1, n=1, 4]; correct B, distractor D
    p_to_d = np.array([[[0.1, 0.2, 0.1, 0.6]]])
    run = {"p_to_c": p_to_c, "p_to_d": p_to_d, "correct": np.array([1]), "distractor": np.array([3])}
    assert steering.cers(run)[0, 0] == pytest.approx(0.5)
    assert steering.symmetric_cers(run)[0, 0] == pytest.approx((0.5 + 0.5) / 2)
    assert steering.ncs_grid(run)[0, 0] == pytest.approx(-0.5)
    masked = {
        "matched_p_clean": np.array([[0.0, 0.9, 0.1, 0.0]]),
        "matched_p_masked": np.array([[[0.1, 0.4, 0.3, 0.2]]]),
        "matched_correct": np.array([1]),
        "mismatched_p_clean": np.array([[0.25, 0.3, 0.25, 0.2]]),
        "mismatched_p_masked": np.array([[[0.3, 0.2, 0.3, 0.2]]]),
        "mismatched_correct": np.array([1]),
    }
    assert necessity.drop(masked, "matched")[0, 0] == pytest.approx(0.5)
    assert necessity.ncs(masked)[0, 0] == pytest.approx(0.5 - 0.1)
    with pytest.raises(ValueError, match="arm"):
        necessity.drop(masked, "blank")
    with pytest.raises(ValueError, match="not paired"):
        necessity.ncs({**masked, "mismatched_correct": np.array([2])})


def test_runs_are_cached_per_chunk_and_resume(lm, sets, tmp_path, monkeypatch):
    cache = ResultCache(tmp_path)
    first = steering.steering_run(lm, "co", 3, SEED, sets[:2], 10.0, "all", cache, chunk=2)
    masked = necessity.necessity_run(lm, "co", 3, SEED, sets[:2], "last", cache, chunk=2)
    assert first["p_to_c"].shape == (3, 2, 4) and masked["matched_p_masked"].shape == (3, 2, 4)

    def refuse(*args, **kwargs):
        raise AssertionError("recomputed a cached chunk")

    monkeypatch.setattr(steering, "steer_items", refuse)
    monkeypatch.setattr(necessity, "mask_items", refuse)
    again = steering.steering_run(lm, "co", 3, SEED, sets[:2], 10.0, "all", cache, chunk=2)
    assert all(np.array_equal(first[k], again[k]) for k in first)
    assert np.array_equal(
        masked["matched_p_masked"],
        necessity.necessity_run(lm, "co", 3, SEED, sets[:2], "last", cache, chunk=2)["matched_p_masked"],
    )
    with pytest.raises(AssertionError, match="recomputed"):  # another beta is another entry
        steering.steering_run(lm, "co", 3, SEED, sets[:2], 3.0, "all", cache, chunk=2)


def test_single_head_sets_cover_each_head_once_in_order():
    sets = necessity.single_heads(2, 3)  # [6, 2, 3]
    assert sets.shape == (6, 2, 3) and (sets.sum((1, 2)) == 1).all()
    assert sets[4, 1, 1] and [tuple(np.argwhere(s)[0]) for s in sets] == [(l, h) for l in range(2) for h in range(3)]
