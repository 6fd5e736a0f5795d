"""Train one embedded toy VLM, from an initialisation or from another toy's weights, into helpers/toy/models/<name>/
(`make toy-model FAMILY=qwen2_vl`). The default toy is a chain of such runs: helpers.toy.chain (`make toy-model`).

    .venv/bin/python -m helpers.toy.train [--family F] [--layers L] [--seed S] [--name NAME]
        [--steps N] [--batch-size B] [--max-minutes M] [--restart]

Every family trains on the same data, curriculum and losses; only the model (helpers.toy.build) and its
initialisation differ. Each run writes its log, held-out accuracies and model card into its model folder.

The schedule is by progress, the larger of step / steps and elapsed / budget: on a slow or shared CPU
the `--max-minutes` budget ends the run early and the stages and the cosine decay follow elapsed time
(the log records the steps actually run). `--restart` runs the schedule once more from a finished run's
weights (a warm restart, as SGDR's cycles: Loshchilov & Hutter 2017, arXiv 1608.03983; warmup, openings and
stages again, on items the first cycle never saw) and extends its log and summary. Items are deterministic
by step; the task shares adapt to the running losses.

Rebuilds tokenizer/processor/config (helpers.toy.build), trains on a mixture of every task on both
synthetic corpora (fresh items each step, seeds >= 10_000), logs the curve to training_log.csv,
saves fp32 weights + processor with `save_pretrained`, reloads the saved folder and
writes its held-out accuracies to heldout_accuracy.json.

Curriculum: two OPENINGS, each until its skill is learned (a loss gate) or its share of the run is
spent: the text arm alone until the option lookup is learned, then naming and describing at twice the
batch until the panels are seen; then the STAGES by the progress left: single images and the text
lookup, then the describe tasks (answers "1 <label> 2 <label> ...", "A <label> B <label> ...") and
their inverses, the locate tasks ("black cross in panel 4, ...", "black cross (C), ...") bind image
tokens to panel numbers and cell letters both ways while the strip questions read that binding out,
then every task; within a stage each kind's share follows the loss it has left (adapted_mixture).
Strip questions and grids are trained as conversations that ask the same image about as many regions
as it has, drawn with replacement, so one image carries up to six supervised answers and no answer
follows by elimination. Mismatched and blank-image MCQ items carry a uniformly random correct letter,
so the model learns to answer them at chance. Beside the answer and prompt losses, two word losses
bind places to objects: each image token must name its region's class words and place through the tied
output head (image_word_loss), and each mention of a shown object in the text must name its place from
the hidden state after PLACE_LAYER layers (place_word_loss). What was tried and did not work is recorded
in helpers/toy/TRAINING.md.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForImageTextToText, AutoProcessor

from helpers.engine.adapters import adapter_for
from helpers.engine.inputs import overlap_mask, render_prompt
from helpers.engine.item import LETTERS
from helpers.engine.loading import load_model
from helpers.engine.mcq import option_token_ids
from helpers.stimuli.corpora import Item, SyntheticCorpus
from helpers.storage.cache import ResultCache
from helpers.storage.paths import CACHE, TOY_MODELS, toy_folder
from helpers.toy.build import DEPTH_DEFAULTS, FAMILIES, MERGE_SIZE, MERGE_SIZES, build_config, build_processor
from helpers.toy.card import write_card
from helpers.toy.depth import LayerImageDrop, depth_recipe, initialised_from, letter_answer_loss
from helpers.toy.evaluate import evaluate, pointing_audit
from helpers.toy.probe import depth_profile, log_columns, profile_line
from helpers.toy.tasks import POINTING_KINDS, RETARGETABLE, build_task_items, retarget

TRAIN_SEED_BASE = 10_000
# The training defaults are the first stage of the default toy's chain (helpers/toy/chain.py; reasons in
# helpers/toy/README.md): Qwen3-VL's own 2 x 2 merge (a 64-px region is 2 x 2 image tokens) and DropHead on every
# text layer, in a 125-minute budget. The modular toy (`toy-modular`) is `--merge-size 4 --drophead 0
# --max-minutes 42`.
DEFAULT_MERGE, DEFAULT_DROPHEAD, DEFAULT_MINUTES = 2, 0.2, 125.0
# The run goes through three stages, each a mixture of tasks (share of the conversations of a step),
# switched by progress (the larger of step / steps and elapsed / budget). Seeing comes first: single
# images are cheap and teach colour and shape, while the option lookup starts on text (it is learned
# late and suddenly, so it starts early); then the panels and cells are bound to their numbers and
# letters both ways (describe: place -> object, locate: object -> place), the strip questions read
# that binding out, and matched MCQ joins naming to the lookup; then every task. Within a stage the
# shares adapt to the loss each kind has left (adapted_mixture). Single-image kinds are about a quarter
# of a strip or grid conversation's tokens, so they get large shares.
STAGES = [
    (
        0.12,
        {
            "single_name": 0.35,
            "strip_describe": 0.15,
            "grid_describe": 0.1,
            "strip_locate": 0.05,
            "single_matched": 0.1,
            "text": 0.1,
            "option_recall": 0.15,
        },
    ),
    (
        0.35,
        {
            "single_name": 0.08,
            "strip_describe": 0.1,
            "strip_locate": 0.1,
            "strip_ord": 0.1,
            "strip_ref": 0.1,
            "grid_describe": 0.05,
            "grid_locate": 0.08,
            "grid": 0.08,
            "single_matched": 0.12,
            "text": 0.1,
            "option_recall": 0.09,
            "pointing_plain": 0.04,
            "pointing_matched": 0.04,
        },
    ),
    (
        1.00,
        {
            "strip_describe": 0.05,
            "strip_locate": 0.06,
            "strip_ord": 0.08,
            "strip_ref": 0.08,
            "single_name": 0.04,
            "grid_describe": 0.03,
            "grid_locate": 0.05,
            "grid": 0.10,
            "grid_oracle": 0.04,
            "grid_blank": 0.03,
            "single_matched": 0.18,
            "single_mismatched": 0.05,
            "text": 0.13,
            "option_recall": 0.08,
            "pointing_plain": 0.06,
            "pointing_oracle": 0.02,
            "pointing_matched": 0.04,
            "pointing_blank": 0.01,
            "pointing_mismatched": 0.01,
        },
    ),
]
# The pointing suite's tasks (counting, spatial relation, arithmetic, scene retrieval, attribute) join the
# binding stage as plain grids and matched single cells (0.08 before normalising) and the last stage in every
# variant (0.14: below their synthetic-grid and single-image analogues' 0.39), so that their leak audits can
# pass (the oracle hint and the matched cell read, the blank and mismatched arms at chance). Each stage's
# shares are then normalised to sum to one.
STAGES = [(end, {kind: share / sum(mixture.values()) for kind, share in mixture.items()}) for end, mixture in STAGES]


@dataclass(frozen=True)
class Opening:
    """A phase before the STAGES: `mixture` at `batch_scale` x the batch size until the running answer
    loss per turn of `gate` is below `learned_loss`, or until the run's progress reaches `max_progress`."""

    name: str
    mixture: dict
    gate: str
    learned_loss: float
    max_progress: float
    batch_scale: int = 1


# Two things are learned suddenly after a plateau, and only when they have most of a step to
# themselves, so the run opens with them, one after the other:
# - the option lookup (find the option the note names, answer its letter): on the text arm alone it
#   left chance by step 150-1,000 (by the seed); with naming and reciting beside it (0.6 text) not by
#   step 450. Switching on at a loss of 0.3 undid it within 60 steps, at 0.1 it survived;
# - seeing: naming single images and describing every panel and cell. From scratch at 0.6 naming and
#   0.4 describing, 48 items a step, the describe loss fell from 0.9 to 0.27 in 300 steps (4.5 min);
#   at the stages' shares (about 14 such items a step) it was still 0.89 after 600 steps.
OPENINGS = (
    Opening("lookup", {"text": 1.0}, gate="text", learned_loss=0.1, max_progress=0.3),
    Opening(
        "seeing",
        {"single_name": 0.5, "strip_describe": 0.2, "grid_describe": 0.2, "text": 0.1},
        gate="strip_describe",
        learned_loss=0.3,
        max_progress=0.45,
        batch_scale=2,
    ),
)
PROMPT_LOSS_WEIGHT = 0.3  # next-token loss on the prompt text, beside the answer loss
# Each image token, as the vision tower hands it to the language model, is read through the final norm
# and the tied output head and must name its region's class words and its place (the panel's digit or
# the cell's letter): the words the questions use. Then "what is in panel 3" and "which cell shows the
# red star" are matches of a word to a token that carries it, and the answer copies the matched token's
# other words (see image_word_loss). Its weight and the hidden state it reads are the depth recipe's
# (Recipe below; DEPTH_DEFAULTS for the toys before it: weight 0.5 at the input).
# Every mention of a shown object in a strip or grid conversation (its label's last token, in prompts and
# answers) must name the object's place (panel digit or cell letter) from the hidden state after
# PLACE_LAYER layers, read through the final norm and the tied head: the object word itself is the query
# that finds its image token, and the place sits at the mention for later layers to gather (the answer's
# letter after "Which cell shows the red star? Answer with the letter.", the digit after "... in panel").
# Without it, that lookup sat at chance through whole runs while the place -> object lookups formed.
PLACE_WORD_WEIGHT = 0.5
PLACE_LAYER = 4
# The answer loss per turn a kind cannot go below: mismatched and blank-image MCQ answers are uniformly
# random letters (ln 4 on the letter, ~0 on the end-of-turn token, each half of the turn's weight).
CHANCE_KINDS = ("single_mismatched", "grid_blank", "pointing_mismatched", "pointing_blank")
LOSS_FLOOR = {kind: math.log(4) / 2 for kind in CHANCE_KINDS}
BLANK_KINDS = ("grid_blank", "pointing_blank")  # images that show none of the item's labels
ADAPT_RANGE = 4.0  # a kind's share moves between 1/4 and 4 x its stage share
PEAK_HOLD = 0.2  # share of the progress at the peak learning rate before the cosine decay
LOSS_MEMORY = 0.9  # running per-kind loss: memory x old + (1 - memory) x this step's
QK_NORM_GAIN = 2.0  # initial query / key RMSNorm gains (see initialise)
# The vision tower's position table: drawn at this std (see initialise) and then frozen. Trained, it was
# washed out: a linear probe told a strip token's panel from the language model's input 1.00 at
# initialisation and 0.21 after a full run (chance 0.17), leaving "which panel shows X" no place to read.
POSITION_TABLE_STD = 0.5


class RecipeError(ValueError):
    """A recipe that cannot run: a value out of range, or a start (restart, init_from) it cannot start from."""


@dataclass(frozen=True)
class Recipe:
    """One training run, as its flags give it (defaults: the first stage of the default toy's chain), beside the
    curriculum and losses above that every run shares.

    family, layers: the model (helpers.toy.build); seed: torch's seed of the initialisation (items are fixed);
    name: its folder under helpers/toy/models/ (None: the family's name; load it as toy-<name>);
    steps, max_minutes: the schedule's length, in steps and in minutes (progress is the larger share);
    batch_size: conversations per step; lr: the peak learning rate after warmup_steps of linear warmup;
    weight_decay, betas: AdamW's; clip_norm: the gradient norm clipped to; threads: torch's CPU threads;
    merge_size: patches merged per image token, per side (None: DEFAULT_MERGE, MERGE_SIZE for llava);
    drophead: DropHead's probability per head (add_drophead);
    image_word_layer: the hidden state the image-word loss reads (0: the language model's input);
    image_word_weight: that loss's weight (0 drops it);
    layer_image_drop: per sequence and layer, P(image hidden from the layer) (helpers.toy.depth.LayerImageDrop);
    option_smoothing: label smoothing among the four option letters (Szegedy et al. 2016; Mueller et al.
    2019, arXiv 1906.02629): a letter answer's target is 1 - eps on the correct letter and eps / 3 on each
    other letter, nothing on the rest of the vocabulary, so the four-letter P(correct) is trained to 1 - eps;
    init_from: the toy whose weights it starts from (toy, toy-<name>; None: an initialisation);
    restart: one more cycle of the schedule from the weights already in its folder (a warm restart);
    eval_every: steps between quick evaluations, depth probes and checkpoint saves;
    n_eval: held-out items per task of the final evaluation (half as many per pointing task)."""

    family: str = "qwen3_vl"
    layers: int = 8
    seed: int = 0
    name: str | None = None
    steps: int = 6000
    batch_size: int = 24
    lr: float = 1e-3
    warmup_steps: int = 100
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.98)
    clip_norm: float = 1.0
    max_minutes: float = DEFAULT_MINUTES
    threads: int = 2
    merge_size: int | None = None
    drophead: float = DEFAULT_DROPHEAD
    image_word_layer: int = DEPTH_DEFAULTS["image_word_layer"]
    image_word_weight: float = DEPTH_DEFAULTS["image_word_weight"]
    layer_image_drop: float = DEPTH_DEFAULTS["layer_image_drop"]
    option_smoothing: float = DEPTH_DEFAULTS["option_smoothing"]
    init_from: str | None = None
    restart: bool = False
    eval_every: int = 400
    n_eval: int = 200

    def __post_init__(self):
        if self.merge_size is None:
            object.__setattr__(self, "merge_size", MERGE_SIZE if self.family == "llava" else DEFAULT_MERGE)
        for key in ("drophead", "layer_image_drop", "option_smoothing"):
            if not 0 <= getattr(self, key) < 1:
                raise RecipeError(f"--{key.replace('_', '-')} {getattr(self, key)} is not a probability in [0, 1)")
        if not 0 <= self.image_word_layer <= self.layers:
            raise RecipeError(f"--image-word-layer {self.image_word_layer} is not one of 0-{self.layers}")
        if self.restart and self.init_from:
            raise RecipeError(
                "--restart continues this folder's run; --init-from starts a new one from another toy: give one"
            )


def stage_mixture(progress: float, opening_end: float) -> dict:
    """The mixture of the stage the run has reached after the openings ended at `opening_end`: the
    STAGES' ends are shares of the progress left after the openings, so a long opening skips no stage."""
    stage_progress = (progress - opening_end) / (1 - opening_end)
    return next(mixture for end, mixture in STAGES if stage_progress < end or end == STAGES[-1][0])


def sample_conversations(step: int, batch_size: int, mixture: dict) -> list[list[Item]]:
    """Fresh items for one step, kind counts drawn from `mixture`, corpus cm or co per kind. A strip
    question or a plain / oracle grid becomes a conversation: the item, then the same image asked about
    as many more regions, drawn with replacement (one image, up to six supervised answers; no turn can
    be answered by elimination, a repeated question by its earlier turn)."""
    rng = np.random.default_rng([TRAIN_SEED_BASE, step])
    kinds = list(mixture)
    counts = rng.multinomial(batch_size, [mixture[k] for k in kinds])
    conversations = []
    for kind, count in zip(kinds, counts):
        n_cm = count if kind in POINTING_KINDS else int(rng.binomial(count, 0.5))  # pointing cells have no corpus
        for corpus_name, n in (("cm", n_cm), ("co", count - n_cm)):
            for item in build_task_items(kind, SyntheticCorpus(corpus_name), n, TRAIN_SEED_BASE + step) if n else []:
                follow_ups = rng.integers(len(item.boxes), size=len(item.boxes) - 1)
                conversations.append(
                    [item] + ([retarget(item, int(i)) for i in follow_ups] if kind in RETARGETABLE else [])
                )
    return conversations


def place_word_spans(turns: list[Item], text: str) -> list[tuple[int, int]]:
    """(char end of the mention, region index) of every mention of a shown object's label in a strip or
    grid conversation's `text` (single images have no place; a blank grid shows none of its labels)."""
    item = turns[0]
    if "image" in item.boxes or item.kind in BLANK_KINDS:
        return []
    mentions = []
    for region, label in enumerate(item.labels):
        start = text.find(label)
        while start >= 0:
            mentions.append((start + len(label), region))
            start = text.find(label, start + 1)
    return mentions


def conversation_batch(
    processor, conversations: list[list[Item]]
) -> tuple[dict, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One left-padded batch of multi-turn chats (the image in the first user turn). Returns the model
    inputs, the [B, T] answer weights (each turn's answer tokens and end-of-turn token share a weight of
    1, so every question counts the same whatever its answer's length; 0 elsewhere), the [B, T]
    mask of the other text tokens (for the prompt loss), the [B, T] place targets: at the last token
    of every mention of a shown object, the token id of its place (panel digit or cell letter); -100
    elsewhere, and the [B, T] letter targets: at an MCQ answer's letter, its option index; -100 elsewhere."""
    tokenizer = processor.tokenizer
    tokenizer.padding_side = "left"
    texts, answer_spans, mentions = [], [], []
    for turns in conversations:
        text, spans = "", []
        for i, item in enumerate(turns):
            text += (
                render_prompt(processor, item)
                if i == 0
                else processor.apply_chat_template(
                    [{"role": "user", "content": item.prompt}], tokenize=False, add_generation_prompt=True
                )
            )
            spans.append((len(text), len(text) + len(item.answer) + len(tokenizer.eos_token)))
            text += item.answer + tokenizer.eos_token + "\n"
        texts.append(text)
        answer_spans.append(spans)
        mentions.append(place_word_spans(turns, text))
    encoded = processor(
        text=texts,
        images=[turns[0].image for turns in conversations],
        padding=True,
        return_offsets_mapping=True,
        return_tensors="pt",
    )
    offsets = encoded.pop("offset_mapping")  # [B, T, 2], expanded text
    # the one placeholder of each row is expanded to n copies of itself: later chars move by (n - 1) x its length
    n_image = (encoded["input_ids"] == processor.image_token_id).sum(dim=1)  # [B]
    shifts = ((n_image - 1) * len(processor.image_token)).tolist()
    answer_weight = torch.zeros(encoded["input_ids"].shape)  # [B, T]
    letter_target = torch.full(encoded["input_ids"].shape, -100)  # [B, T]
    for row, (turns, spans) in enumerate(zip(conversations, answer_spans)):
        for item, (start, end) in zip(turns, spans):
            turn = overlap_mask(offsets[row], start + shifts[row], end + shifts[row])
            answer_weight[row, turn] = 1.0 / int(turn.sum())
            if item.answer in LETTERS:
                letter_target[row, turn.nonzero()[0, 0]] = LETTERS.index(item.answer)
    place_target = torch.full(encoded["input_ids"].shape, -100)  # [B, T]
    for row, (turns, row_mentions) in enumerate(zip(conversations, mentions)):
        places = [region.removeprefix("panel ") for region in turns[0].boxes]
        for end, region in row_mentions:
            last = overlap_mask(offsets[row], end - 1 + shifts[row], end + shifts[row]).nonzero()[-1, 0]
            place_target[row, last] = tokenizer.convert_tokens_to_ids(places[region])
    image = encoded["input_ids"] == processor.image_token_id
    prompt = encoded["attention_mask"].bool() & ~image & (answer_weight == 0)
    return dict(encoded), answer_weight, prompt, place_target, letter_target


def image_word_targets(tokenizer, conversations: list[list[Item]]) -> list[list[int]]:
    """Per region of the batch (rows in batch order, each image's regions in reading order: panels 1-6,
    cells A-D, or the single image): the token ids its image tokens must name, its class words (none on a
    blank grid) and its place, the panel's digit or the cell's letter (none for a single image)."""
    targets = []
    for turns in conversations:
        item = turns[0]
        for region, label in zip(item.boxes, item.labels):
            words = [] if item.kind in BLANK_KINDS else tokenizer.encode(f" {label}")
            place = region.removeprefix("panel ") if region != "image" else ""
            targets.append(words + (tokenizer.encode(place) if place else []))
    return targets


def region_tokens(adapter, inputs: dict, conversations: list[list[Item]], embeds: torch.Tensor) -> torch.Tensor:
    """[N, hidden]: per region of the batch (the order of image_word_targets), the mean over the region's image
    tokens (the family's adapter maps its box to them) of `embeds` [B, T, hidden], the language model's input:
    1 (merge 4) or 2 x 2 (merge 2) tokens per region in the Qwen toys, 6 or 9 in the LLaVA toy."""
    rows = []
    for row, turns in enumerate(conversations):
        item = turns[0]
        for box in item.boxes.values():
            rows.append(embeds[row, adapter.region_positions(inputs, box, item.image.size, batch_index=row)].mean(0))
    return torch.stack(rows)


def image_word_loss(model, image_tokens: torch.Tensor, targets: list[list[int]]) -> torch.Tensor:
    """Summed over regions: the mean cross-entropy of each region's target words, read from its image
    tokens (`image_tokens` [N, hidden], region_tokens of the vision features as the language model
    receives them) through the language model's final norm and tied output head."""
    if image_tokens.shape[0] != len(targets):
        raise ValueError(f"{image_tokens.shape[0]} image tokens but {len(targets)} regions: one per region expected")
    log_probs = model.lm_head(model.model.language_model.norm(image_tokens)).log_softmax(dim=-1)  # [N, V]
    width = max(len(t) for t in targets)
    ids = torch.tensor([t + [0] * (width - len(t)) for t in targets])  # [N, K]
    present = torch.tensor([[1.0] * len(t) + [0.0] * (width - len(t)) for t in targets])  # [N, K]
    picked = log_probs.gather(1, ids) * present
    return -(picked.sum(dim=1) / present.sum(dim=1).clamp(min=1)).sum()


def place_word_loss(model, hidden: torch.Tensor, place_target: torch.Tensor) -> torch.Tensor:
    """Summed over the mentions (place_target >= 0, [B, T]): the cross-entropy of the place read from
    `hidden` [B, T, hidden] through the final norm and the tied output head."""
    at = place_target >= 0
    if not at.any():
        return hidden.sum() * 0.0
    logits = model.lm_head(model.model.language_model.norm(hidden[at]))  # [M, V]
    return torch.nn.functional.cross_entropy(logits, place_target[at], reduction="sum")


def training_step(
    model, processor, adapter, conversations: list[list[Item]], recipe: Recipe, image_drop: LayerImageDrop
) -> tuple[float, dict]:
    """Forward and backward on one step's conversations, one sub-batch per task kind (kinds differ a lot
    in length; padding them together would waste most of the compute). Loss: the mean over the step's
    answer turns of each turn's mean cross-entropy (answer and end-of-turn tokens), so a one-letter
    MCQ answer weighs as much as a 23-token description; plus PROMPT_LOSS_WEIGHT x the mean next-token
    loss on the other text tokens, a dense signal for the position-reading heads, plus the recipe's image-word
    weight x the mean image-word loss per region, plus PLACE_WORD_WEIGHT x the mean place-word loss per object
    mention. A letter answer's cross-entropy is against the recipe's smoothed target (letter_answer_loss).
    Returns the loss and {kind: mean answer loss per turn, "image_words": mean image-word loss per region,
    "place_words": mean place-word loss per mention}."""
    by_kind: dict[str, list] = {}
    for turns in conversations:
        by_kind.setdefault(turns[0].kind, []).append(turns)
    batches = {kind: conversation_batch(processor, group) for kind, group in by_kind.items()}
    turns_by_kind = {kind: sum(len(turns) for turns in group) for kind, group in by_kind.items()}
    n_turns = sum(turns_by_kind.values())
    n_prompt = sum(int(batch[2][:, 1:].sum()) for batch in batches.values())
    n_mentions = max(sum(int((batch[3] >= 0).sum()) for batch in batches.values()), 1)
    targets = {kind: image_word_targets(processor.tokenizer, group) for kind, group in by_kind.items()}
    n_image_tokens = sum(len(t) for t in targets.values())
    letter_ids = option_token_ids(processor.tokenizer)
    total, turn_loss, word_sum, place_sum = 0.0, {}, 0.0, 0.0
    for kind, (inputs, answer_weight, prompt, place_target, letter_target) in batches.items():
        image_drop.image_keys = inputs["input_ids"] == processor.image_token_id  # [b, T]
        output = model(**inputs, output_hidden_states=True)
        logits = output.logits[:, :-1]  # [b, T-1, V]
        token_loss = torch.nn.functional.cross_entropy(
            logits.transpose(1, 2), inputs["input_ids"][:, 1:], reduction="none"
        )  # [b, T-1]
        letters = letter_target[:, 1:] >= 0  # [b, T-1]: positions that predict a letter answer
        if letters.any():
            token_loss = token_loss.masked_scatter(
                letters,
                letter_answer_loss(
                    logits[letters], letter_target[:, 1:][letters], letter_ids, recipe.option_smoothing
                ),
            )
        answer_sum = (token_loss * answer_weight[:, 1:]).sum()
        # hidden_states[l]: after l layers; [0] is the language model's input, the vision features at the image tokens
        regions = region_tokens(adapter, inputs, by_kind[kind], output.hidden_states[recipe.image_word_layer])
        word_loss = image_word_loss(model, regions, targets[kind])
        place_loss = place_word_loss(model, output.hidden_states[PLACE_LAYER], place_target)
        loss = (
            answer_sum / n_turns
            + PROMPT_LOSS_WEIGHT * (token_loss * prompt[:, 1:]).sum() / n_prompt
            + recipe.image_word_weight * word_loss / n_image_tokens
            + PLACE_WORD_WEIGHT * place_loss / n_mentions
        )
        loss.backward()
        total += loss.item()
        turn_loss[kind] = answer_sum.item() / turns_by_kind[kind]
        word_sum += word_loss.item()
        place_sum += place_loss.item()
    turn_loss["image_words"] = word_sum / n_image_tokens
    turn_loss["place_words"] = place_sum / n_mentions
    return total, turn_loss


def adapted_mixture(mixture: dict, turn_loss: dict) -> dict:
    """`mixture` with each kind's share scaled by the answer loss it has left (its running loss per turn
    above LOSS_FLOOR) relative to the mixture's mean, the scale clipped to [1/ADAPT_RANGE, ADAPT_RANGE]:
    solved kinds give their compute to the unsolved ones but stay in (a forgotten kind's loss rises and
    its share with it). Kinds without a running loss yet keep their share."""
    excess = {kind: max(turn_loss[kind] - LOSS_FLOOR.get(kind, 0.0), 0.0) for kind in mixture if kind in turn_loss}
    mean = sum(mixture[kind] * e for kind, e in excess.items()) / max(sum(mixture[kind] for kind in excess), 1e-12)
    if mean <= 0:
        return mixture
    scale = {
        kind: min(ADAPT_RANGE, max(1 / ADAPT_RANGE, excess[kind] / mean)) if kind in excess else 1.0
        for kind in mixture
    }
    total = sum(mixture[kind] * scale[kind] for kind in mixture)
    return {kind: mixture[kind] * scale[kind] / total for kind in mixture}


def add_drophead(model, p: float) -> list:
    """DropHead (Zhou et al. 2020, "Scheduled DropHead", arXiv 2004.13342) on every text layer: in training
    mode each attention head's output (its slice of o_proj's input) is dropped with probability `p`,
    independently per sequence, and the kept heads are rescaled by heads / kept so the layer's expected
    output is unchanged. A hook on o_proj's input, so the saved model is a plain model of its family.
    Deviation: a constant `p` instead of the paper's V-shaped schedule (our curriculum's openings
    already gate when heads specialise). Returns the hook handles."""

    def drop(module, args):
        (heads_out,) = args  # [B, T, H * D]
        if not module.training or p == 0:
            return None
        batch, length, width = heads_out.shape
        n_heads = module.n_heads
        kept = (torch.rand(batch, 1, n_heads, 1, device=heads_out.device) >= p).to(heads_out.dtype)  # [B, 1, H, 1]
        scale = n_heads / kept.sum(dim=2, keepdim=True).clamp(min=1)  # [B, 1, 1, 1]
        return ((heads_out.view(batch, length, n_heads, width // n_heads) * kept * scale).view(batch, length, width),)

    handles = []
    for layer in model.model.language_model.layers:
        attention = layer.self_attn
        attention.o_proj.n_heads = attention.config.num_attention_heads
        handles.append(attention.o_proj.register_forward_pre_hook(drop))
    return handles


def vision_position_table(model) -> torch.nn.Embedding | None:
    """The vision tower's learned position table (Qwen3-VL, LLaVA's CLIP); None for Qwen2-VL (2-D rotary)."""
    tower = getattr(model.model, "visual", None) or model.model.vision_tower
    if hasattr(tower, "pos_embed"):
        return tower.pos_embed
    return getattr(getattr(tower, "embeddings", None), "position_embedding", None)  # CLIPVisionModel


def initialise(model):
    """Two departures from the default initialisation (std 0.02 everywhere, norm gains 1), both saved in
    the weights, so the model loads as a plain model of its family (each where the family has the part):
    - QK-norm gains QK_NORM_GAIN: RMS-normed queries and keys cap an attention logit at
      gain^2 x sqrt(head_dim); at gain 1 a content lookup cannot focus on one option among ~60 tokens,
      and AdamW grows the gains by ~lr per step (the 10 x 12-head model's were 1.1-1.5 after 2,110 steps);
    - the vision tower's position table at POSITION_TABLE_STD: at std 0.02 a panel's or cell's place
      is not linearly decodable from its image tokens at the language model's input (cell probe 0.32 on
      fresh grids, chance 0.25), at 0.3 it is (0.93), so "which cell shows X" can be read off the
      matched tokens instead of being rebuilt from rotary positions inside the language model."""
    with torch.no_grad():
        for layer in model.model.language_model.layers:
            if hasattr(layer.self_attn, "q_norm"):  # Qwen3 text only
                layer.self_attn.q_norm.weight.fill_(QK_NORM_GAIN)
                layer.self_attn.k_norm.weight.fill_(QK_NORM_GAIN)
        table = vision_position_table(model)
        if table is not None:
            table.weight.normal_(0.0, POSITION_TABLE_STD)
            table.weight.requires_grad_(False)  # see POSITION_TABLE_STD


def learning_rate(step: int, progress: float, peak: float, warmup: int) -> float:
    """Linear warmup over `warmup` steps, the peak until PEAK_HOLD of the progress, then cosine from peak
    to peak/10 as progress goes PEAK_HOLD -> 1."""
    if step < warmup:
        return peak * (step + 1) / warmup
    decay = max(0.0, min(1.0, progress) - PEAK_HOLD) / (1 - PEAK_HOLD)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * decay)))


def save_model(model, processor, folder):
    """save_pretrained of the fp32 weights (at most 20 MB) and of the processor (tokenizer, chat template)."""
    model.config.dtype = torch.float32
    model.save_pretrained(folder)
    processor.save_pretrained(folder)


def earlier_run(model_dir, recipe: Recipe, processor) -> tuple[list[dict], list[dict]]:
    """The cycles [{steps, train_seconds, max_minutes}] and log rows of the run saved in `model_dir`, which a
    restart continues; a RecipeError unless that run had this `recipe` and tokenizer."""
    summary_path, log_path = model_dir / "heldout_accuracy.json", model_dir / "training_log.csv"
    if not (summary_path.is_file() and log_path.is_file() and (model_dir / "model.safetensors").is_file()):
        raise RecipeError(f"--restart continues a finished run, but {model_dir} holds no weights, log and summary")
    summary = json.loads(summary_path.read_text())
    given = {
        "family": recipe.family, "layers": recipe.layers, "seed": recipe.seed, "batch_size": recipe.batch_size,
        "lr": recipe.lr, "merge_size": recipe.merge_size, "drophead": recipe.drophead, **depth_recipe(recipe),
    }  # fmt: skip
    saved = depth_recipe(None) | summary  # runs from before the depth recipe had its defaults
    differing = {key: (saved.get(key), value) for key, value in given.items() if saved.get(key) != value}
    if differing:
        raise RecipeError(f"--restart must keep the saved run's recipe; (saved, given) differ for {differing}")
    if AutoProcessor.from_pretrained(model_dir).tokenizer.get_vocab() != processor.tokenizer.get_vocab():
        raise RecipeError(f"the tokenizer saved in {model_dir} is not the one this code builds: retrain from scratch")
    cycles = summary.get("cycles") or [
        {"steps": summary["steps"], "train_seconds": summary["train_seconds"], "max_minutes": summary["max_minutes"]}
    ]
    with open(log_path, newline="") as f:
        rows = [{"step": row.pop("step"), "cycle": row.pop("cycle", "") or 1, **row} for row in csv.DictReader(f)]
    if len(rows) != sum(cycle["steps"] for cycle in cycles):
        raise ValueError(f"{log_path} holds {len(rows)} steps; the summary says {cycles}")
    return cycles, rows


def output_folder(family: str, name: str | None) -> Path:
    """The folder of the model, its training_log.csv, heldout_accuracy.json and card: helpers/toy/models/<name>
    (name default: the family). The default toy (helpers/toy/model) is the last stage of a chain of runs, made by
    helpers.toy.chain (`make toy-model`)."""
    return TOY_MODELS / (name or family.replace("_", ""))


def starting_point(recipe: Recipe, model_dir: Path, processor) -> tuple:
    """(model, earlier cycles, earlier log rows, origin) of a run: a restart's weights and the cycles and rows it
    continues, the init_from toy's weights, or an initialisation; origin is the toy an init_from run started
    from, kept through its restarts (None from an initialisation). A RecipeError if it cannot start there."""
    if recipe.restart:
        earlier_cycles, earlier_rows = earlier_run(model_dir, recipe, processor)
        origin = json.loads((model_dir / "heldout_accuracy.json").read_text()).get("initialised_from")
        return AutoModelForImageTextToText.from_pretrained(model_dir), earlier_cycles, earlier_rows, origin
    if recipe.init_from:
        source = toy_folder(recipe.init_from)
        if source is None or not (source / "heldout_accuracy.json").is_file():
            raise RecipeError(f"--init-from {recipe.init_from!r} is not a trained toy: give toy or toy-<name>")
        origin = initialised_from(recipe.init_from)
        if AutoProcessor.from_pretrained(source).tokenizer.get_vocab() != processor.tokenizer.get_vocab():
            raise RecipeError(f"--init-from {recipe.init_from}: its tokenizer is not the one this code builds")
        return AutoModelForImageTextToText.from_pretrained(source), [], [], origin
    model = AutoModelForImageTextToText.from_config(
        build_config(processor.tokenizer, recipe.family, recipe.layers, recipe.merge_size)
    )
    initialise(model)
    return model, [], [], None


def write_log(model_dir: Path, log_rows: list[dict]) -> None:
    """training_log.csv: one row per step, a column per key any row has."""
    columns = list(dict.fromkeys(key for row in log_rows for key in row))
    with open(model_dir / "training_log.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(log_rows)


def train(recipe: Recipe) -> dict:
    """Train `recipe` into its folder (output_folder): the weights and processor, training_log.csv,
    heldout_accuracy.json and the card. Returns the summary heldout_accuracy.json holds."""
    torch.manual_seed(recipe.seed)
    torch.set_num_threads(recipe.threads)
    torch.set_flush_denormal(True)
    model_dir = output_folder(recipe.family, recipe.name)
    model_dir.mkdir(parents=True, exist_ok=True)
    processor = build_processor(recipe.family, recipe.merge_size)
    model, earlier_cycles, earlier_rows, origin = starting_point(recipe, model_dir, processor)
    adapter = adapter_for(model.config, processor)
    first_step = sum(cycle["steps"] for cycle in earlier_cycles)  # this cycle's items follow the earlier cycles'
    earlier_seconds = sum(cycle["train_seconds"] for cycle in earlier_cycles)
    drophead_hooks = add_drophead(model, recipe.drophead)
    image_drop = LayerImageDrop(model, recipe.layer_image_drop)
    print(
        f"{recipe.family}: params {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M -> {model_dir}", flush=True
    )
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=recipe.lr, weight_decay=recipe.weight_decay, betas=recipe.betas)

    start = time.time()
    log_rows, running_loss, opening, opening_end = [], {}, 0, 0.0
    for step in range(recipe.steps):
        progress = max(step / recipe.steps, (time.time() - start) / (60 * recipe.max_minutes))
        if progress >= 1:
            print(f"time budget of {recipe.max_minutes} min reached after {step} steps", flush=True)
            break
        model.train()
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, progress, recipe.lr, warmup=recipe.warmup_steps)
        optimizer.zero_grad()
        while opening < len(OPENINGS) and (
            running_loss.get(OPENINGS[opening].gate, math.inf) < OPENINGS[opening].learned_loss
            or progress >= OPENINGS[opening].max_progress
        ):
            print(f"opening {OPENINGS[opening].name!r} ended at step {step} ({time.time() - start:.0f} s)", flush=True)
            opening, opening_end = opening + 1, progress
        if opening < len(OPENINGS):
            mixture, batch_size = OPENINGS[opening].mixture, recipe.batch_size * OPENINGS[opening].batch_scale
        else:
            mixture, batch_size = stage_mixture(progress, opening_end), recipe.batch_size
        mixture = adapted_mixture(mixture, running_loss)
        conversations = sample_conversations(first_step + step, batch_size, mixture)
        loss, turn_loss = training_step(model, processor, adapter, conversations, recipe, image_drop)
        torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.clip_norm)
        optimizer.step()
        for kind, value in turn_loss.items():
            running_loss[kind] = (
                value if kind not in running_loss else (LOSS_MEMORY * running_loss[kind] + (1 - LOSS_MEMORY) * value)
            )
        row = {
            "step": first_step + step + 1,
            "cycle": len(earlier_cycles) + 1,
            "opening": OPENINGS[opening].name if opening < len(OPENINGS) else "",
            "loss": round(loss, 5),
            "lr": optimizer.param_groups[0]["lr"],
            "elapsed_s": round(earlier_seconds + time.time() - start, 1),
            **{f"loss_{kind}": round(value, 4) for kind, value in sorted(running_loss.items())},
        }
        if (step + 1) % recipe.eval_every == 0:
            quick = evaluate(model, processor, n_per_kind=24, seed=999)
            row.update({kind: result["value"] for kind, result in quick.items()})
            save_model(model, processor, model_dir)
            with tempfile.TemporaryDirectory() as scratch:  # each checkpoint is a new model: nothing to reuse
                profile = depth_profile(load_model(str(model_dir)), ResultCache(scratch))
            row.update(log_columns(profile))
            print(json.dumps(row), flush=True)
            print(profile_line(profile), flush=True)
        elif (step + 1) % 25 == 0:
            print(json.dumps(row), flush=True)
        log_rows.append(row)

    log_rows = earlier_rows + log_rows
    write_log(model_dir, log_rows)
    cycles = [
        *earlier_cycles,
        {
            "steps": len(log_rows) - first_step,
            "train_seconds": round(time.time() - start, 1),
            "max_minutes": recipe.max_minutes,
        },
    ]
    for handle in drophead_hooks:
        handle.remove()
    image_drop.remove()
    save_model(model, processor, model_dir)
    shipped = AutoModelForImageTextToText.from_pretrained(model_dir)
    shipped_processor = AutoProcessor.from_pretrained(model_dir)
    results = evaluate(shipped, shipped_processor, n_per_kind=recipe.n_eval)
    pointing_results = pointing_audit(shipped, shipped_processor, n_per_task=recipe.n_eval // 2)
    summary = {
        "family": recipe.family,
        "layers": recipe.layers,
        "seed": recipe.seed,
        "steps": len(log_rows),
        "cycles": cycles,
        "batch_size": recipe.batch_size,
        "lr": recipe.lr,
        "train_seconds": round(sum(cycle["train_seconds"] for cycle in cycles), 1),
        "max_minutes": cycles[0]["max_minutes"],
        "threads": recipe.threads,
        "merge_size": recipe.merge_size,
        "drophead": recipe.drophead,
        **depth_recipe(recipe),
        **({"initialised_from": origin} if origin else {}),
        "results": results,
        "probe": depth_profile(load_model(str(model_dir)), ResultCache(CACHE)),
        "pointing": pointing_results,
    }
    (model_dir / "heldout_accuracy.json").write_text(json.dumps(summary, indent=2) + "\n")
    write_card(model_dir)
    print(json.dumps(summary, indent=2), flush=True)
    return summary


def argument_parser() -> argparse.ArgumentParser:
    """The command's flags: one per Recipe field a run is given, its default the Recipe's."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", choices=FAMILIES, default=Recipe.family)
    parser.add_argument("--layers", type=int, default=Recipe.layers, help="text decoder layers")
    parser.add_argument(
        "--seed", type=int, default=Recipe.seed, help="torch seed of the initialisation (items are fixed)"
    )
    parser.add_argument("--name", default=Recipe.name, help="folder under helpers/toy/models/ (load as toy-<name>)")
    parser.add_argument("--steps", type=int, default=Recipe.steps)
    parser.add_argument("--batch-size", type=int, default=Recipe.batch_size)
    parser.add_argument("--lr", type=float, default=Recipe.lr)
    parser.add_argument(
        "--max-minutes",
        type=float,
        default=Recipe.max_minutes,
        help="time budget: the schedule follows max(step/steps, elapsed/budget) and stops at 1",
    )
    parser.add_argument(
        "--threads", type=int, default=Recipe.threads, help="torch CPU threads (1 is faster on a shared CPU)"
    )
    parser.add_argument(
        "--merge-size",
        type=int,
        choices=MERGE_SIZES,
        default=Recipe.merge_size,
        help=f"Qwen towers: patches merged per image token, per side (4: one token per 64-px region; 2: 2 x 2); "
        f"default {DEFAULT_MERGE} ({MERGE_SIZE} for llava, its only layout)",
    )
    parser.add_argument(
        "--drophead", type=float, default=Recipe.drophead, help="DropHead probability per head (add_drophead)"
    )
    parser.add_argument(
        "--image-word-layer",
        type=int,
        default=Recipe.image_word_layer,
        help="hidden state the image-word loss reads (0: the input)",
    )
    parser.add_argument("--image-word-weight", type=float, default=Recipe.image_word_weight, help="0 drops that loss")
    parser.add_argument(
        "--layer-image-drop",
        type=float,
        default=Recipe.layer_image_drop,
        help="per sequence and layer, P(image hidden from the layer)",
    )
    parser.add_argument(
        "--option-smoothing",
        type=float,
        default=Recipe.option_smoothing,
        help="label smoothing among the four option letters",
    )
    parser.add_argument(
        "--init-from",
        default=Recipe.init_from,
        help="start from this toy's weights (a name: toy, toy-<name>) instead of an initialisation; same tokenizer",
    )
    parser.add_argument(
        "--eval-every", type=int, default=Recipe.eval_every, help="quick evaluation, depth probe and a checkpoint save"
    )
    parser.add_argument("--n-eval", type=int, default=Recipe.n_eval, help="held-out items per task for the final JSON")
    parser.add_argument(
        "--restart",
        action="store_true",
        help="one more cycle of the schedule (--steps, --max-minutes) from the weights already in the output folder "
        "(a warm restart); its log and held-out summary are extended",
    )
    return parser


def main():
    """The flags into a Recipe, then train it; a recipe that cannot run stops with its message."""
    parser = argument_parser()
    try:
        train(Recipe(**vars(parser.parse_args())))
    except RecipeError as error:
        parser.error(str(error))


if __name__ == "__main__":
    main()
