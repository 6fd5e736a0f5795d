"""Option-letter probabilities and greedy answers.

P(letter) is the softmax of the next-token logits at the last prompt position restricted to the four
option letters (renormalised over A-D), as the paper reports it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from helpers.engine.inputs import Batch, build_batch
from helpers.engine.item import LETTERS, Item


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
