"""The toy model's training batches: multi-turn conversations are masked exactly like the single-turn
batches the evaluation and the engine use, and every answer turn carries a total weight of one."""

import csv
import json

import numpy as np
import pytest
import torch
from transformers import AutoModelForImageTextToText, AutoProcessor

from helpers.engine import build_batch
from helpers.engine.adapters import adapter_for
from helpers.engine.mcq import option_token_ids
from helpers.stimuli.corpora import SyntheticCorpus
from helpers.storage.paths import TOY_MODEL
from helpers.toy.build import build_config, build_processor
from helpers.toy.tasks import RETARGETABLE, build_task_items
from helpers.toy.train import (
    ADAPT_RANGE,
    LOSS_FLOOR,
    OPENINGS,
    POSITION_TABLE_STD,
    QK_NORM_GAIN,
    STAGES,
    Recipe,
    adapted_mixture,
    conversation_batch,
    depth_recipe,
    earlier_run,
    image_word_loss,
    image_word_targets,
    initialise,
    place_word_loss,
    region_tokens,
    sample_conversations,
    stage_mixture,
)
from tests.tiny_models import tiny_model


@pytest.fixture(scope="module")
def processor():
    return AutoProcessor.from_pretrained(TOY_MODEL)


def test_single_turn_masks_equal_build_batch(processor):
    items = build_task_items("text", SyntheticCorpus("cm"), 3, 0) + build_task_items(
        "grid", SyntheticCorpus("co"), 2, 0
    )
    inputs, weight, prompt, _, _ = conversation_batch(processor, [[item] for item in items])
    answer = weight > 0
    reference = build_batch(processor, items, answers=[item.answer for item in items])
    # a conversation closes every turn with a newline after <|im_end|>: one more (unscored) column
    assert torch.equal(inputs["input_ids"][:, :-1], reference.inputs["input_ids"])
    assert torch.equal(answer[:, :-1], reference.answer_mask | reference.end_mask) and not answer[:, -1].any()
    assert not (prompt[:, :-1] & reference.image_mask).any() and not (prompt & answer).any()


def test_conversation_answers_decode_to_every_turn(processor):
    conversations = [c for c in sample_conversations(5, 40, STAGES[-1][1]) if c[0].kind in RETARGETABLE][:3]
    assert conversations and all(len(c) == len(c[0].boxes) for c in conversations)
    inputs, weight, _, _, _ = conversation_batch(processor, conversations)
    answer = weight > 0
    assert torch.allclose(weight.sum(dim=1), torch.tensor([float(len(turns)) for turns in conversations]))
    for row, turns in enumerate(conversations):
        assert all(t.target in turns[0].boxes and t.image is turns[0].image for t in turns)
        decoded = processor.tokenizer.decode(inputs["input_ids"][row][answer[row]])
        assert decoded == "".join(t.answer + "<|im_end|>" for t in turns)


def test_follow_up_regions_are_drawn_with_replacement():
    conversations = [
        c for step in range(4) for c in sample_conversations(step, 40, STAGES[-1][1]) if c[0].kind in RETARGETABLE
    ]
    repeats = [len(turns) - len({t.target for t in turns}) for turns in conversations]
    # six strip panels asked six times with replacement repeat one with probability 1 - 6!/6^6 = 0.985
    assert sum(r > 0 for r in repeats) > 0.8 * len(repeats)
    assert max(len({t.target for t in turns}) for turns in conversations) >= 4


def test_stages_cover_the_run_and_mixtures_are_distributions():
    assert [end for end, _ in STAGES] == sorted(end for end, _ in STAGES) and STAGES[-1][0] == 1.0
    for _, mixture in STAGES:
        assert np.isclose(sum(mixture.values()), 1.0)
    assert stage_mixture(0.0, 0.0) is STAGES[0][1] and stage_mixture(0.99, 0.0) is STAGES[-1][1]
    assert stage_mixture(1.5, 0.0) is STAGES[-1][1]


def test_openings_are_gated_mixtures_and_the_stages_share_out_what_they_leave():
    for opening in OPENINGS:
        assert np.isclose(sum(opening.mixture.values()), 1.0) and opening.gate in opening.mixture
        assert 0 < opening.learned_loss < 0.7 and 0 < opening.max_progress < 1 and opening.batch_scale >= 1
    assert [o.max_progress for o in OPENINGS] == sorted(o.max_progress for o in OPENINGS)
    first_end = STAGES[0][0]
    assert stage_mixture(0.2, opening_end=0.2) is STAGES[0][1]
    assert stage_mixture(0.2 + 0.8 * first_end - 1e-6, opening_end=0.2) is STAGES[0][1]
    assert stage_mixture(0.2 + 0.8 * first_end + 1e-6, opening_end=0.2) is STAGES[1][1]
    assert stage_mixture(0.999, opening_end=0.2) is STAGES[-1][1]


def test_adapted_mixture_moves_shares_to_kinds_with_loss_left():
    mixture = {"text": 0.5, "strip_ref": 0.25, "single_mismatched": 0.25}
    assert adapted_mixture(mixture, {}) == mixture  # nothing measured yet
    solved = {"text": 0.0, "strip_ref": 1.0, "single_mismatched": LOSS_FLOOR["single_mismatched"]}
    adapted = adapted_mixture(mixture, solved)
    # excess loss 0 / 1 / 0 against a mean of 0.25: ref is scaled x4 (the clip), the others x1/4
    expected = {"text": 0.5 / 4, "strip_ref": 0.25 * ADAPT_RANGE, "single_mismatched": 0.25 / 4}
    total = sum(expected.values())
    assert adapted == pytest.approx({kind: share / total for kind, share in expected.items()})
    even = adapted_mixture(mixture, {"text": 0.3, "strip_ref": 0.3})  # equal loss left: unchanged
    assert even == pytest.approx(mixture)


def test_initialise_sets_the_norm_gains_and_the_position_table_scale():
    model = tiny_model("qwen3_vl", "eager")
    initialise(model)
    for layer in model.model.language_model.layers:
        assert torch.all(layer.self_attn.q_norm.weight == QK_NORM_GAIN)
        assert torch.all(layer.self_attn.k_norm.weight == QK_NORM_GAIN)
    table = model.model.visual.pos_embed.weight
    assert abs(table.std().item() - POSITION_TABLE_STD) < 0.1 * POSITION_TABLE_STD


def test_image_word_targets_name_each_regions_class_and_place(processor):
    tokenizer = processor.tokenizer
    strip, grid, blank, single = (
        build_task_items(kind, SyntheticCorpus("co"), 1, 3)[0]
        for kind in ("strip_ord", "grid", "grid_blank", "single_matched")
    )
    targets = image_word_targets(tokenizer, [[strip], [grid], [blank], [single]])
    assert len(targets) == 6 + 4 + 4 + 1  # one per image token
    decoded = [tokenizer.decode(t) for t in targets]
    assert decoded[:6] == [f" {label}{i + 1}" for i, label in enumerate(strip.labels)]
    assert decoded[6:10] == [f" {label}{letter}" for label, letter in zip(grid.labels, "ABCD")]
    assert decoded[10:14] == list("ABCD")  # a blank grid: places only
    assert decoded[14] == f" {single.labels[0]}"


def test_pointing_items_name_their_cells_and_a_blank_pointing_grid_only_its_places(processor):
    tokenizer = processor.tokenizer
    plain, blank, matched = (
        build_task_items(k, None, 1, 3)[0] for k in ("pointing_plain", "pointing_blank", "pointing_matched")
    )
    decoded = [tokenizer.decode(t) for t in image_word_targets(tokenizer, [[plain], [blank], [matched]])]
    assert decoded == [f" {label}{letter}" for label, letter in zip(plain.labels, "ABCD")] + list("ABCD") + [
        f" {matched.labels[0]}"
    ]


def test_image_word_loss_is_the_mean_target_cross_entropy_per_token():
    model = tiny_model("qwen3_vl", "eager")
    hidden = model.config.text_config.hidden_size
    tokens = torch.randn(3, hidden)  # [N, hidden]
    targets = [[5, 7], [2], [9, 1, 4]]
    log_probs = model.lm_head(model.model.language_model.norm(tokens)).log_softmax(-1)
    expected = -sum(log_probs[i, t].mean() for i, t in enumerate(targets))
    assert torch.allclose(image_word_loss(model, tokens, targets), expected)
    with pytest.raises(ValueError, match="3 image tokens but 2 regions"):
        image_word_loss(model, tokens, targets[:2])


def test_place_targets_mark_the_last_token_of_every_mention_of_a_shown_object(processor):
    tokenizer = processor.tokenizer
    grid = build_task_items("grid", SyntheticCorpus("cm"), 1, 5)[0]
    strip = build_task_items("strip_locate", SyntheticCorpus("co"), 1, 5)[0]
    unplaced = [build_task_items(kind, SyntheticCorpus("cm"), 1, 5)[0] for kind in ("grid_blank", "text")]
    inputs, _, _, place, _ = conversation_batch(processor, [[grid], [strip]] + [[item] for item in unplaced])
    ids = inputs["input_ids"]
    # the grid prompt names its target once; the locate answer names all six objects, the prompt none
    assert [int((place[row] >= 0).sum()) for row in range(4)] == [1, 6, 0, 0]
    for row, item in enumerate((grid, strip)):
        places = [region.removeprefix("panel ") for region in item.boxes]
        for position in (place[row] >= 0).nonzero()[:, 0]:
            before = tokenizer.decode(ids[row, position - 1 : position + 1])
            region = next(i for i, label in enumerate(item.labels) if before.endswith(label.split()[1]))
            assert tokenizer.decode([int(place[row, position])]) == places[region]
    assert tokenizer.decode([int(place[0][place[0] >= 0])]) == grid.target


def test_a_pointing_question_naming_its_cell_content_is_a_placed_mention(processor):
    counting = build_task_items("pointing_plain", None, 2, 5)[1]  # item 1: the counting task
    unplaced = [build_task_items(kind, None, 2, 5)[1] for kind in ("pointing_blank", "pointing_matched")]
    assert counting.corpus == "counting" and f"exactly {counting.labels[counting.correct]}" in counting.prompt
    _, _, _, place, _ = conversation_batch(processor, [[counting]] + [[item] for item in unplaced])
    assert [int((place[row] >= 0).sum()) for row in range(3)] == [1, 0, 0]
    assert processor.tokenizer.decode([int(place[0][place[0] >= 0])]) == counting.target


def test_place_word_loss_is_the_summed_place_cross_entropy_at_the_mentions():
    model = tiny_model("qwen3_vl", "eager")
    hidden = torch.randn(2, 5, model.config.text_config.hidden_size)  # [B, T, hidden]
    place = torch.full((2, 5), -100)
    place[0, 3], place[1, 1], place[1, 4] = 7, 2, 9
    logits = model.lm_head(model.model.language_model.norm(hidden))
    expected = -sum(logits[b, t].log_softmax(-1)[place[b, t]] for b, t in ((0, 3), (1, 1), (1, 4)))
    assert torch.allclose(place_word_loss(model, hidden, place), expected, atol=1e-5)
    assert place_word_loss(model, hidden, torch.full((2, 5), -100)).item() == 0.0


@pytest.mark.parametrize("family, tokens_per_panel", [("qwen3_vl", 1), ("qwen2_vl", 1), ("llava", 6)])
def test_region_tokens_average_each_regions_image_tokens(family, tokens_per_panel):
    processor = build_processor(family)
    model = AutoModelForImageTextToText.from_config(build_config(processor.tokenizer, family, layers=2))
    adapter = adapter_for(model.config, processor)
    strip = build_task_items("strip_ord", SyntheticCorpus("cm"), 1, 3)[0]
    inputs, *_ = conversation_batch(processor, [[strip]])
    embeds = torch.randn(*inputs["input_ids"].shape, 4)  # [1, T, 4]
    regions = region_tokens(adapter, inputs, [[strip]], embeds)  # [6, 4]
    image = (inputs["input_ids"][0] == processor.image_token_id).nonzero().flatten()
    assert image.numel() == 6 * tokens_per_panel
    first = adapter.region_positions(inputs, strip.boxes["panel 1"], strip.image.size)
    assert first.numel() == tokens_per_panel and set(first.tolist()) <= set(image.tolist())
    torch.testing.assert_close(regions[0], embeds[0, first].mean(0))


def test_initialise_freezes_the_llava_towers_position_table_and_leaves_qwen2_vl_without_one():
    processor = build_processor("llava")
    llava = AutoModelForImageTextToText.from_config(build_config(processor.tokenizer, "llava", layers=2))
    initialise(llava)
    table = llava.model.vision_tower.embeddings.position_embedding.weight
    assert not table.requires_grad and abs(table.std().item() - POSITION_TABLE_STD) < 0.1 * POSITION_TABLE_STD
    processor = build_processor("qwen2_vl")
    qwen2 = AutoModelForImageTextToText.from_config(build_config(processor.tokenizer, "qwen2_vl", layers=2))
    initialise(qwen2)  # no QK-norm, no position table: nothing to set
    assert all(p.requires_grad for p in qwen2.parameters())


def _finished_run(folder, processor, summary: dict, n_rows: int):
    """A folder as a finished run leaves it: processor, weights file, summary and log (n_rows steps)."""
    processor.save_pretrained(folder)
    (folder / "model.safetensors").write_bytes(b"")
    (folder / "heldout_accuracy.json").write_text(json.dumps(summary))
    with open(folder / "training_log.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["step", "opening", "loss"])
        writer.writeheader()
        writer.writerows({"step": i + 1, "opening": "", "loss": 1.0} for i in range(n_rows))


def test_a_restart_continues_only_a_finished_run_of_the_same_recipe_and_tokenizer(tmp_path, processor):
    recipe = {"family": "qwen3_vl", "layers": 8, "seed": 0, "batch_size": 24, "lr": 1e-3, "merge_size": 2}
    summary = {**recipe, "drophead": 0.2, "steps": 3, "train_seconds": 60.0, "max_minutes": 1.0}
    depth = depth_recipe(None)  # the saved run predates the depth recipe: its defaults
    args = Recipe(**recipe, drophead=0.2, **depth)
    with pytest.raises(ValueError, match="holds no weights"):
        earlier_run(tmp_path, args, processor)
    _finished_run(tmp_path, processor, summary, 3)
    cycles, rows = earlier_run(tmp_path, args, processor)
    assert cycles == [{"steps": 3, "train_seconds": 60.0, "max_minutes": 1.0}]
    assert [(row["step"], row["cycle"]) for row in rows] == [("1", 1), ("2", 1), ("3", 1)]
    with pytest.raises(ValueError, match=r"'drophead': \(0.2, 0.0\)"):
        earlier_run(tmp_path, Recipe(**recipe, drophead=0.0, **depth), processor)
    with pytest.raises(ValueError, match=r"'option_smoothing': \(0.0, 0.005\)"):
        earlier_run(tmp_path, Recipe(**recipe, drophead=0.2, **(depth | {"option_smoothing": 0.005})), processor)
    with pytest.raises(ValueError, match="not the one this code builds"):
        earlier_run(tmp_path, args, build_processor("llava"))
    _finished_run(tmp_path, processor, summary, 2)
    with pytest.raises(ValueError, match="holds 2 steps"):
        earlier_run(tmp_path, args, processor)


def test_letter_targets_sit_at_the_option_letter_tokens_of_mcq_answers(processor):
    items = [
        *build_task_items("single_matched", SyntheticCorpus("cm"), 3, 5),
        *build_task_items("grid", SyntheticCorpus("co"), 2, 5),
    ]
    strip = build_task_items("strip_ord", SyntheticCorpus("cm"), 1, 5)
    inputs, _, _, _, letters = conversation_batch(processor, [[item] for item in items] + [strip])
    at = letters >= 0
    assert at.sum(dim=1).tolist() == [1, 1, 1, 1, 1, 0]  # one letter per MCQ answer, none in a strip answer
    letter_ids = torch.tensor(option_token_ids(processor.tokenizer))
    assert (inputs["input_ids"][at] == letter_ids[letters[at]]).all()
    assert letters[at].tolist() == [item.correct for item in items]
