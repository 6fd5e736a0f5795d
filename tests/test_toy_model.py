"""The shipped toy model: loads through the hub path, its token masks are right, it meets the held-out
thresholds on fresh items (a seed used neither in training nor in its saved accuracy JSON)."""

import pytest
import torch
from transformers import AutoModelForImageTextToText, AutoProcessor

from helpers.engine import build_batch
from helpers.engine.mcq import greedy_answers, letter_probs, option_token_ids, prob_correct
from helpers.stimuli.corpora import SyntheticCorpus, build_items, strip_items
from helpers.storage.paths import TOY_MODEL
from helpers.toy.evaluate import THRESHOLDS, evaluate

TEST_SEED = 4242


@pytest.fixture(scope="module")
def processor():
    return AutoProcessor.from_pretrained(TOY_MODEL)


@pytest.fixture(scope="module")
def model(two_threads):
    return AutoModelForImageTextToText.from_pretrained(TOY_MODEL).eval()


def test_saved_model_shape_and_size(model, processor):
    text = model.config.text_config
    assert (text.num_hidden_layers, text.num_attention_heads, text.num_key_value_heads) == (8, 16, 4)
    assert len(model.config.vision_config.deepstack_visual_indexes) <= model.config.vision_config.depth
    assert next(model.parameters()).dtype == torch.float32
    assert (TOY_MODEL / "model.safetensors").stat().st_size < 20e6
    assert processor.tokenizer.padding_side == "left"
    assert processor.image_processor.patch_size * processor.image_processor.merge_size == 32  # 2 x 2 tokens per 64 px


@pytest.mark.parametrize("kind", ["strip_ord", "strip_ref", "grid_oracle", "text", "single_matched"])
def test_query_span_and_answer_masks_decode_to_their_text(processor, kind):
    tokenizer = processor.tokenizer
    items = build_items(kind, SyntheticCorpus("co"), 6, seed=1)
    batch = build_batch(processor, items, answers=[item.answer for item in items])
    ids = batch.inputs["input_ids"]
    for row, item in enumerate(items):
        span_text = tokenizer.decode(ids[row][batch.query_mask[row]])
        assert item.query_text in span_text and len(span_text) <= len(item.query_text) + 2
        assert tokenizer.decode(ids[row][batch.answer_mask[row]]) == item.answer
        assert tokenizer.decode(ids[row][batch.prompt_text_mask[row]]).strip() == item.prompt
        assert tokenizer.convert_ids_to_tokens(ids[row][batch.end_mask[row]].tolist()) == ["<|im_end|>"]
        last = batch.last_prompt_index[row]
        assert batch.answer_mask[row, last + 1] and not batch.answer_mask[row, : last + 1].any()
        n_image = int(batch.image_mask[row].sum())
        assert n_image == item.image.width * item.image.height // 32**2  # a token per 32 x 32 px


def test_left_padding_puts_the_last_prompt_token_last(processor):
    items = build_items("strip_ref", SyntheticCorpus("cm"), 3, 0) + build_items("text", SyntheticCorpus("cm"), 3, 0)
    batch = build_batch(processor, items)
    assert batch.last_prompt_mask[:, -1].all() and batch.last_prompt_mask.sum() == len(items)
    assert (batch.inputs["attention_mask"][:, 0] == 0).any()  # rows differ in length: left pads


def test_option_letters_are_single_distinct_tokens(processor):
    ids = option_token_ids(processor.tokenizer)
    assert len(set(ids)) == 4 and processor.tokenizer.convert_ids_to_tokens(ids) == ["A", "B", "C", "D"]


def test_greedy_ordinal_answers_on_cartoon_strips(model, processor):
    items = strip_items(SyntheticCorpus("cm"), 8, TEST_SEED + 1, "ord")
    answers = greedy_answers(model, processor, items, max_new_tokens=12)
    assert sum(a == item.answer for a, item in zip(answers, items)) >= 7


def test_greedy_answers_match_the_items(model, processor):
    items = strip_items(SyntheticCorpus("cm"), 8, TEST_SEED, "ord") + strip_items(
        SyntheticCorpus("co"), 8, TEST_SEED, "ref"
    )
    answers = greedy_answers(model, processor, items, max_new_tokens=12)
    assert sum(a == item.answer for a, item in zip(answers, items)) >= 15


def test_mismatched_probabilities_are_near_chance_per_item(model, processor):
    items = build_items("single_mismatched", SyntheticCorpus("cm"), 40, TEST_SEED)
    probs = letter_probs(model, processor, items)
    assert torch.allclose(probs.sum(1), torch.ones(len(items)))
    assert 0.15 <= prob_correct(probs, items).mean() <= 0.35
    assert probs.max(dim=1).values.median() < 0.6  # no confident guess on most items


@pytest.fixture(scope="module")
def heldout(model, processor):
    return evaluate(model, processor, n_per_kind=120, seed=TEST_SEED)


@pytest.mark.parametrize("kind", list(THRESHOLDS))
def test_heldout_accuracy_meets_threshold(heldout, kind):
    result = heldout[kind]
    low, high = THRESHOLDS[kind][1:]
    assert low <= result["value"] <= high, f"{kind}: {result}"
