"""Option-letter probabilities and greedy answers, clean and under many head-set interventions at once.

P(letter) is the softmax of the next-token logits at the last prompt position restricted to the four
option letters (renormalised over A-D), as the paper reports it.

`letter_probs_under` is the shared core of steering (CERS: +beta on one cell's keys) and necessity (NCS: hide the
image's keys): n head-sets [n, L, H] of one item run as n batch rows through `heads.run_head_sets`, in
forwards of at most `sets_per_forward` copies, and each copy's last-position logits become
P(A..D) renormalised over the four letters.

Row groups say at which query rows the bias applies: "all" rows, the "image" token rows, the "prompt"
text rows (question and options; the paper's question/option rows) or only the "last" prompt row. The masking
says how a head is masked: "hide" (the default) or one of the visual-head repositories' (helpers.engine.masking).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import torch

from helpers.engine.head_sets import run_head_sets
from helpers.engine.inputs import Batch, build_batch
from helpers.engine.item import LETTERS, Item
from helpers.engine.masking import KEYED, check_masking
from helpers.engine.row_groups import ROW_GROUPS, takes_row_group


def option_token_ids(tokenizer, letters: Sequence[str] = LETTERS) -> list[int]:
    """The token id of each option letter as the first answer token; each must be a single token."""
    ids = []
    for letter in letters:
        pieces = tokenizer.encode(letter, add_special_tokens=False)
        if len(pieces) != 1:
            raise ValueError(
                f"option letter {letter!r} is {len(pieces)} tokens {pieces} for this tokenizer; "
                "P(letter) needs single-token letters"
            )
        ids.append(pieces[0])
    return ids


def letter_probs_from_logits(last_logits: torch.Tensor, letter_ids: Sequence[int]) -> torch.Tensor:
    """last_logits [B, V] -> [B, len(letter_ids)] probabilities renormalised over the letters (fp32)."""
    return torch.softmax(last_logits[:, list(letter_ids)].float(), dim=-1)


@torch.no_grad()
def letter_probs(model, processor, items: Sequence[Item] | Batch) -> torch.Tensor:
    """[B, 4] P(A..D | prompt) for MCQ items (or an already built batch without answers)."""
    batch = items if isinstance(items, Batch) else build_batch(processor, items)
    inputs = {k: v.to(model.device) for k, v in batch.inputs.items()}
    logits = model(**inputs, logits_to_keep=1).logits[:, -1]  # [B, V]; left padding: last column
    return letter_probs_from_logits(logits, option_token_ids(processor.tokenizer)).cpu()


def prob_correct(probs: torch.Tensor, items: Sequence[Item]) -> torch.Tensor:
    """probs [B, 4] -> [B] probability of each item's correct letter."""
    correct = torch.tensor([item.correct for item in items])
    return probs.gather(1, correct[:, None])[:, 0]


@torch.no_grad()
def greedy_answers(model, processor, items: Sequence[Item], max_new_tokens: int = 24) -> list[str]:
    """Greedy decoding of each item's answer, stopped at the end-of-turn token; stripped text."""
    batch = build_batch(processor, items)
    inputs = {k: v.to(model.device) for k, v in batch.inputs.items()}
    tokenizer = processor.tokenizer
    generated = model.generate(
        **inputs,
        do_sample=False,
        max_new_tokens=max_new_tokens,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    new_tokens = generated[:, inputs["input_ids"].shape[1] :]  # [B, <= max_new_tokens]
    return [text.strip() for text in tokenizer.batch_decode(new_tokens, skip_special_tokens=True)]


def row_selection(batch: Batch, row_group: str) -> torch.Tensor | str:
    """The query rows of `row_group` (ROW_GROUPS) for a built batch: "all" or a bool [B, T]."""
    if row_group == "all":
        return "all"
    if row_group == "image":
        return batch.image_mask
    if row_group == "prompt":
        return batch.prompt_text_mask
    if row_group == "last":
        return batch.last_prompt_mask
    raise ValueError(f"row group {row_group!r} is not one of {ROW_GROUPS}")


@takes_row_group
@torch.no_grad()
def letter_probs_under(
    lm,
    batch: Batch,
    heads: torch.Tensor,
    keys: torch.Tensor | None,
    bias,
    row_group: str = "all",
    sets_per_forward: int = 64,
    masking: str = "hide",
    factor=0.0,
) -> torch.Tensor:
    """[n, 4] P(A..D) of the one item in `batch` with head-set i [L, H] biased by `bias` on `keys`.

    heads: bool [n, L, H]; keys: bool [1, T] (the same for every set) or [n, T]; bias: a float, HIDE or
    an [n] tensor; row_group: a row group (ROW_GROUPS). sets_per_forward: copies in one forward (the vision tower
    runs once for all of them). masking: how the heads are masked (helpers.engine.masking.MASKINGS; every one
    but "hide" takes bias=HIDE, and only "hide" and "rescale" use `keys`); factor: rescale's factor, a float or
    an [n] tensor."""
    if not isinstance(batch, Batch) or len(batch.items) != 1:
        raise ValueError(f"letter_probs_under takes a Batch of one item (build_batch), got {batch!r:.80}")
    whole = isinstance(sets_per_forward, numbers.Integral) and not isinstance(sets_per_forward, bool)
    if not whole or sets_per_forward < 1:
        raise ValueError(f"sets_per_forward={sets_per_forward!r}: use a whole number >= 1 (copies per forward)")
    check_masking(masking)
    if masking not in KEYED:
        keys = None  # the masking acts on every key
    letter_ids = option_token_ids(lm.processor.tokenizer)
    logits = run_head_sets(  # [n, 1, V]: the output head runs only at the answer row
        lm,
        batch,
        heads,
        keys,
        bias,
        row_selection(batch, row_group),
        logits_to_keep=1,
        max_tokens=sets_per_forward * batch.inputs["input_ids"].shape[1],  # sets_per_forward copies per forward
        masking=masking,
        factor=factor,
    )
    return letter_probs_from_logits(logits[:, -1], letter_ids).cpu()
