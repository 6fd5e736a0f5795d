"""The depth probe (helpers/toy/probe.py) and the depth recipe's training parts (train.LayerImageDrop,
train.letter_answer_loss) against hand computations that do not go through the engine."""

import numpy as np
import pytest
import torch
from transformers import AutoModelForImageTextToText, AutoProcessor

from helpers.engine.inputs import build_batch
from helpers.engine.loading import load_model
from helpers.engine.mcq import option_token_ids
from helpers.stimuli.corpora import items_of
from helpers.storage.cache import ResultCache
from helpers.storage.paths import toy_folder
from helpers.toy.depth import LayerImageDrop, letter_answer_loss
from helpers.toy.probe import PROBE_SEED, depth_profile, layer_sets, log_odds, random_sd_over_draws

N_ITEMS = 3
READS_IN_LAYER_0 = "toy-modular"  # a toy whose layer 0 alone reads the image (NCS 0.747 there, 0.000 elsewhere)


def hiding(image: torch.Tensor):
    """A pre-hook that hides the image keys (`image` [1, T]) at every query row of one attention layer."""

    def hide(module, args, kwargs):
        length = image.shape[1]
        mask = kwargs.get("attention_mask")
        if mask is None:
            mask = torch.ones(length, length, dtype=torch.bool).tril()[None, None]
        keys = image[:, None, None, :]  # [1, 1, 1, T]
        mask = mask & ~keys if mask.dtype == torch.bool else mask.masked_fill(keys, torch.finfo(mask.dtype).min)
        return args, {**kwargs, "attention_mask": mask}

    return hide


def hand_p_correct(model, processor, items, hidden_layer: int | None) -> np.ndarray:
    """P(correct letter) of each item, with the image keys hidden from every head of `hidden_layer` at every
    query row by editing that layer's attention mask (None: the clean model)."""
    letters = option_token_ids(processor.tokenizer)
    out = []
    for item in items:
        inputs = build_batch(processor, [item]).inputs
        handle = None
        if hidden_layer is not None:
            attention = model.model.language_model.layers[hidden_layer].self_attn
            hide = hiding(inputs["input_ids"] == processor.image_token_id)
            handle = attention.register_forward_pre_hook(hide, with_kwargs=True)
        with torch.no_grad():
            probs = model(**inputs).logits[0, -1, letters].softmax(-1)
        if handle is not None:
            handle.remove()
        out.append(float(probs[item.correct]))
    return np.array(out)


def hand_layer_ncs(name: str, layer: int) -> float:
    folder = toy_folder(name)
    model = AutoModelForImageTextToText.from_pretrained(folder).eval()
    processor = AutoProcessor.from_pretrained(folder)
    drops = {}
    for arm in ("matched", "mismatched"):
        items = items_of(f"single_{arm}", "co", N_ITEMS, PROBE_SEED)
        drops[arm] = hand_p_correct(model, processor, items, None) - hand_p_correct(model, processor, items, layer)
    return float((drops["matched"] - drops["mismatched"]).mean())


@pytest.mark.parametrize("name", ["toy", "toy-llava"])
def test_one_layers_ncs_equals_a_hand_computation(name, tmp_path):
    profile = depth_profile(load_model(name), ResultCache(tmp_path), n_items=N_ITEMS)
    for layer in (0, 1):
        assert profile["layer ncs"][layer] == pytest.approx(hand_layer_ncs(name, layer), abs=2e-4)
    assert profile["cumulative ncs"][0] == profile["layer ncs"][0]
    assert profile["all layers ncs"] == profile["cumulative ncs"][-1]
    share = max(profile["layer ncs"]) / profile["all layers ncs"]
    assert profile["largest layer share"] == pytest.approx(share, abs=1e-3)  # rounded to 3 decimals
    assert set(profile["random"]) == {profile["k"], 2 * profile["k"]} and profile["k"] == 11


def test_random_sd_over_draws_is_the_median_of_each_draws_profile(tmp_path):
    lm, cache = load_model("toy"), ResultCache(tmp_path)
    seeds = (0, 1, 2)
    draws = random_sd_over_draws(lm, cache, seeds, n_items=N_ITEMS)
    by_hand = [depth_profile(lm, cache, N_ITEMS, seed=seed)["random"][11]["ncs"]["sd"] for seed in seeds]
    assert list(draws["random k NCS SD"].values()) == by_hand
    assert draws["median"] == sorted(by_hand)[1]
    assert len(set(by_hand)) == 3  # each seed draws its own items and sets


def test_layer_sets_hide_one_layer_then_layers_from_zero():
    sets = layer_sets(3, 2)
    assert sets.shape == (6, 3, 2)
    assert sets[1].tolist() == [[False, False], [True, True], [False, False]]
    assert sets[4].tolist() == [[True, True], [True, True], [False, False]]


def test_log_odds_of_the_papers_operating_point():
    assert log_odds(np.array([0.995]))[0] == pytest.approx(np.log(199))
    assert np.isfinite(log_odds(np.array([1.0, 0.0]))).all()


def test_layer_image_drop_at_p_one_is_the_hand_masked_layer():
    folder = toy_folder(READS_IN_LAYER_0)
    model = AutoModelForImageTextToText.from_pretrained(folder)
    processor = AutoProcessor.from_pretrained(folder)
    items = items_of("single_matched", "co", N_ITEMS, PROBE_SEED)
    expected = hand_p_correct(model.eval(), processor, items, 0)
    drop = LayerImageDrop(model, 1.0 - 1e-9)
    for handle in drop.handles[1:]:  # layer 0 only
        handle.remove()
    letters = option_token_ids(processor.tokenizer)
    model.train()  # the drop acts in training mode only; the toy has no dropout of its own
    got = []
    for item in items:
        inputs = build_batch(processor, [item]).inputs
        drop.image_keys = inputs["input_ids"] == processor.image_token_id
        with torch.no_grad():
            got.append(float(model(**inputs).logits[0, -1, letters].softmax(-1)[item.correct]))
    drop.remove()
    np.testing.assert_allclose(got, expected, atol=1e-5)
    assert min(expected) < 0.5  # hiding layer 0 from the image matters on this toy: the test can fail


def test_letter_answer_loss_is_cross_entropy_at_zero_and_smooths_to_one_minus_eps():
    logits = torch.randn(5, 12)
    letters, target = [3, 5, 7, 9], torch.tensor([0, 1, 2, 3, 1])
    plain = torch.nn.functional.cross_entropy(logits, torch.tensor(letters)[target], reduction="none")
    torch.testing.assert_close(letter_answer_loss(logits, target, letters, 0.0), plain)
    eps = 0.005
    best = torch.full((1, 12), -30.0)
    best[0, letters] = torch.log(torch.tensor([1 - eps, eps / 3, eps / 3, eps / 3]))
    optimum = letter_answer_loss(best, torch.tensor([0]), letters, eps)
    for moved in (0.99, 0.999):
        other = best.clone()
        other[0, letters] = torch.log(torch.tensor([moved, (1 - moved) / 3, (1 - moved) / 3, (1 - moved) / 3]))
        assert letter_answer_loss(other, torch.tensor([0]), letters, eps) > optimum
