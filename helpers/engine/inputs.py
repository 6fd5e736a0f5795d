"""Items -> one batched processor input, plus token masks for the attention sources.

The same code path serves the toy model and a real Qwen-VL-style model: chat template (one user turn:
the image, then the prompt) -> `processor(text, images, padding)`. Padding is on the LEFT, so the last
column is every row's last prompt token when no answer is appended (what generation needs).

Char offsets of an item's query span are mapped to tokens through the tokenizer's offset mapping, on
the text the processor really hands its tokenizer (recorded by _RecordingTokenizer): the image placeholder
replaced by the processor's expansion (image tokens and, for families that tile, their tile and row markers),
plus whatever the processor inserts (PaliGemma: <bos> after the image and a newline at the end; Molmo 2: <bos>
in front). So the mapping holds for any processor and any BPE, whose token boundaries need not match words.

The front door for one item: `one_item_inputs` turns an ``Item``, a built ``Batch`` of one item or a processor output
into the processor output a forward takes, checked against the family's input layout before any forward;
`as_batch` an Item or a Batch into a Batch. `item_batch`: the one-item batch of an item, built once and memoised.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from helpers.engine.item import Item
from helpers.storage import timers

BATCH_MEMORY = 2**30  # bytes of tensors the batch memo may hold (the toy's 400 batches take ~10 MiB)

_batches: dict[int, tuple[Item, object, Batch]] = {}  # id(item) -> (item, processor, batch)


@dataclass
class Batch:
    inputs: dict  # processor output for model(**inputs): input_ids [B, T], attention_mask [B, T],
    # pixel_values (Qwen: [P, D] with image_grid_thw [B, 3]; LLaVA: [B, 3, H, W])
    query_mask: torch.Tensor  # [B, T] bool: tokens overlapping the item's query span
    last_prompt_mask: torch.Tensor  # [B, T] bool: one True per row, the last token before the answer
    answer_mask: torch.Tensor  # [B, T] bool: the appended answer's tokens (all False without answers)
    end_mask: torch.Tensor  # [B, T] bool: the end-of-turn token after the answer (all False without answers)
    image_mask: torch.Tensor  # [B, T] bool: image placeholder tokens (<|image_pad|>)
    prompt_text_mask: torch.Tensor  # [B, T] bool: the tokens of the item's prompt text (question and options)
    items: list[Item]

    @property
    def last_prompt_index(self) -> torch.Tensor:  # [B] long
        return self.last_prompt_mask.long().argmax(dim=1)


def render_prompt(processor, item: Item) -> str:
    """The chat-template text of the user turn, ending with the assistant header."""
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": item.prompt}]}]
    return processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def overlap_mask(offsets: torch.Tensor, start: int, end: int) -> torch.Tensor:
    """offsets [T, 2] -> [T] bool: non-empty tokens whose char range overlaps [start, end)."""
    token_start, token_end = offsets[:, 0], offsets[:, 1]
    return (token_end > token_start) & (token_start < end) & (token_end > start)


def repeated_image_token_id(processor) -> int:
    """The token the processor repeats once per image feature: its image_token_id, except where that is the
    placeholder it expands: Gemma3Processor (image_token = boi_token; it repeats the tokenizer's image_token),
    Ovis2Processor (image_token "<image>"; replace_image_token repeats "<IMG_ATOM>") and Molmo2Processor
    (image_token "<|image|>"; replace_image_token repeats "<im_patch>")."""
    if processor.image_token == getattr(processor, "boi_token", None):
        return processor.tokenizer.image_token_id
    repeated = {"Ovis2Processor": "<IMG_ATOM>", "Molmo2Processor": "<im_patch>"}.get(type(processor).__name__)
    if repeated is not None:
        return processor.tokenizer.convert_tokens_to_ids(repeated)
    return processor.image_token_id


@timers.timed("items")
def build_batch(processor, items: Sequence[Item], answers: Sequence[str] | None = None) -> Batch:
    """Tokenise `items` (one image each) in one left-padded batch. With `answers` (one per item, e.g.
    the items' own `answer` or a model's greedy answer), each row is teacher-forced: prompt + answer +
    the tokenizer's end-of-turn token."""
    if not items:
        raise ValueError("build_batch needs at least one item")
    if answers is not None and len(answers) != len(items):
        raise ValueError(f"got {len(answers)} answers for {len(items)} items")
    tokenizer = processor.tokenizer
    tokenizer.padding_side = "left"
    image_token = processor.image_token

    prompts = [render_prompt(processor, item) for item in items]
    for item, prompt in zip(items, prompts):
        if prompt.count(image_token) != 1:
            raise ValueError(
                f"item {item.kind} {item.seed_key}: expected one image placeholder, "
                f"the chat template gave {prompt.count(image_token)}"
            )
    end_text = tokenizer.eos_token if answers is not None else ""
    texts = [
        prompt + (answer + end_text if answers is not None else "")
        for prompt, answer in zip(prompts, answers or [""] * len(items))
    ]
    encoded, tokenized = _encode(processor, texts, [[item.image] for item in items])  # one image per row
    offsets = encoded.pop("offset_mapping")  # [B, T, 2], chars of the tokenized texts
    encoded.pop("labels", None)  # PaliGemma's processor adds training labels: the engine never computes a loss

    B, T = encoded["input_ids"].shape
    query_mask, last_prompt_mask, answer_mask, end_mask, prompt_text_mask = (
        torch.zeros(B, T, dtype=torch.bool) for _ in range(5)
    )
    for row, (item, prompt) in enumerate(zip(items, prompts)):
        at = _after_image(texts[row], tokenized[row], image_token, item)  # char of texts[row] -> char tokenized
        prompt_start = at(prompt.rindex(item.prompt))
        query_mask[row] = overlap_mask(
            offsets[row], prompt_start + item.query_span[0], prompt_start + item.query_span[1]
        )
        prompt_text_mask[row] = overlap_mask(offsets[row], prompt_start, prompt_start + len(item.prompt))
        if not query_mask[row].any():
            raise ValueError(f"item {item.kind} {item.seed_key}: no token covers query span {item.query_span}")
        token_end = offsets[row, :, 1]
        answer_start = at(len(prompt))
        in_prompt = (token_end > offsets[row, :, 0]) & (token_end <= answer_start)
        last = int(in_prompt.nonzero().max())
        if answers is not None:
            answer_end = answer_start + len(answers[row])
            if offsets[row, last + 1, 0] != answer_start:
                raise ValueError(f"item {item.kind} {item.seed_key}: a token straddles the prompt/answer boundary")
            answer_mask[row] = overlap_mask(offsets[row], answer_start, answer_end)
            end_mask[row] = overlap_mask(offsets[row], answer_end, answer_end + len(end_text))
        last_prompt_mask[row, last] = True
    image_mask = encoded["input_ids"] == repeated_image_token_id(processor)
    return Batch(
        inputs=dict(encoded),
        query_mask=query_mask,
        last_prompt_mask=last_prompt_mask,
        answer_mask=answer_mask,
        end_mask=end_mask,
        image_mask=image_mask,
        prompt_text_mask=prompt_text_mask,
        items=list(items),
    )


class _RecordingTokenizer:
    """The processor's tokenizer, recording the texts it is called on (the processor's final texts)."""

    def __init__(self, tokenizer):
        self._tokenizer, self.texts = tokenizer, None

    def __getattr__(self, name):
        return getattr(self._tokenizer, name)

    def __call__(self, text, *args, **kwargs):
        self.texts = [text] if isinstance(text, str) else list(text)
        return self._tokenizer(text, *args, **kwargs)


def _encode(processor, texts: list[str], images: list) -> tuple[dict, list[str]]:
    """processor(texts, images) with offsets, and the texts its tokenizer was really given (one per row)."""
    tokenizer = processor.tokenizer
    recording = processor.tokenizer = _RecordingTokenizer(tokenizer)
    try:
        encoded = processor(text=texts, images=images, padding=True, return_offsets_mapping=True, return_tensors="pt")
    finally:
        processor.tokenizer = tokenizer
    if recording.texts is None or len(recording.texts) != len(texts):
        raise ValueError(f"{type(processor).__name__} did not tokenize the {len(texts)} texts in one call")
    return encoded, recording.texts


def _after_image(text: str, tokenized: str, image_token: str, item: Item):
    """The map from a char of `text` after its image placeholder to the same char in `tokenized` (the text the
    tokenizer got): the text after the placeholder appears there whole, after the image's expansion."""
    image_end = text.index(image_token) + len(image_token)
    rest = text[image_end:]
    rest_start = tokenized.rfind(rest)
    if rest_start < 0:
        raise ValueError(
            f"item {item.kind} {item.seed_key}: the processor changed the text after the image, so its prompt "
            "cannot be found in the tokenized text"
        )

    def at(char: int) -> int:
        if char < image_end:
            raise ValueError(
                f"item {item.kind} {item.seed_key}: the prompt must follow the image in the chat template"
            )
        return rest_start + char - image_end

    return at


def one_item_inputs(loaded, item: Item | Batch | dict) -> dict:
    """The processor output of one item (batch 1), checked (``Adapter.check_inputs``): an Item is built with the
    model's processor (build_batch); a Batch must hold one item; a dict is taken as a processor output."""
    if isinstance(item, Item):
        inputs = build_batch(loaded.processor, [item]).inputs
    elif isinstance(item, Batch):
        if len(item.items) != 1:
            raise ValueError(f"the Batch holds {len(item.items)} items; pass a Batch of one item (or the Item)")
        inputs = item.inputs
    elif isinstance(item, dict):
        inputs = item
    else:
        raise TypeError(f"item is a {type(item).__name__}; pass an Item, a Batch of one item or a processor output")
    loaded.adapter.check_inputs(inputs)
    return inputs


def as_batch(loaded, items: Item | Batch) -> Batch:
    """A built Batch: an Item is built with the model's processor (build_batch), a Batch is taken as it is."""
    if isinstance(items, Item):
        return build_batch(loaded.processor, [items])
    if isinstance(items, Batch):
        return items
    raise TypeError(f"items is a {type(items).__name__}; pass an Item or a Batch (build_batch)")


def _nbytes(batch: Batch) -> int:
    return sum(v.numel() * v.element_size() for v in batch.inputs.values() if isinstance(v, torch.Tensor))


def item_batch(processor, item: Item) -> Batch:
    """build_batch(processor, [item]), memoised per item object while the memo stays under BATCH_MEMORY."""
    hit = _batches.get(id(item))
    if hit is not None and hit[0] is item and hit[1] is processor:
        return hit[2]
    batch = build_batch(processor, [item])
    if sum(_nbytes(b) for _, _, b in _batches.values()) + _nbytes(batch) <= BATCH_MEMORY:
        _batches[id(item)] = (item, processor, batch)  # holding the item keeps its id from being reused
    return batch
