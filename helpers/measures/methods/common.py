"""What the published methods share: one-item batches, region keys, answers, the refusals, P(correct).

Every method scores heads [L, H] (candidate layers x query heads), higher = more of the method's kind of head, and
refuses (ValueError) items, corpora or models that cannot serve it, saying why.
"""

from __future__ import annotations

import numpy as np
import torch

from helpers.engine.inputs import Batch, build_batch
from helpers.engine.item import Item
from helpers.engine.mcq import greedy_answers, letter_probs_from_logits, option_token_ids


def need_items(items, method: str) -> list[Item]:
    items = list(items)
    if not items:
        raise ValueError(f"{method} needs at least one item")
    return items


def need_regions(lm, method: str) -> None:
    """Methods that read the tokens of a pixel region need an adapter that maps regions to image tokens."""
    if not lm.adapter.maps_regions:
        raise ValueError(
            f"{method} reads the image tokens of a region, and the {lm.adapter.family} adapter maps no pixel region "
            "to tokens (the generic adapter knows only the whole image)"
        )


def one_batch(lm, item: Item, answer: str | None = None) -> Batch:
    """build_batch of one item (batch 1), teacher-forcing ``answer`` when given."""
    return build_batch(lm.processor, [item], answers=None if answer is None else [answer])


def region_keys(lm, batch: Batch, name: str, b: int = 0) -> torch.Tensor:
    """Bool [T]: the image tokens of region ``name`` of batch row b's item."""
    item = batch.items[b]
    return lm.adapter.region_mask(batch.inputs, item.boxes[name], item.image.size, b)


def answer_positions(batch: Batch, b: int = 0) -> torch.Tensor:
    """[A] long: the positions of batch row b's teacher-forced answer tokens, ascending."""
    positions = batch.answer_mask[b].nonzero().flatten()
    if positions.numel() == 0:
        raise ValueError(f"item {batch.items[b].kind} {batch.items[b].seed_key} has no answer token")
    return positions


def model_answers(lm, items: list[Item], max_new_tokens: int = 24) -> list[str]:
    """The model's greedy answers (helpers.engine.mcq.greedy_answers), one per item."""
    return greedy_answers(lm.model, lm.processor, items, max_new_tokens=max_new_tokens)


def positions_mask(length: int, positions) -> torch.Tensor:
    mask = torch.zeros(length, dtype=torch.bool)
    mask[torch.as_tensor(positions, dtype=torch.long)] = True
    return mask


def mean_score(run: dict[str, np.ndarray]) -> np.ndarray:
    """The mean over items of a per-item run's "score" [N, L, H] -> [L, H] (the methods whose score is a plain mean
    over items); an empty run is refused."""
    score = np.asarray(run["score"])
    if score.shape[0] == 0:
        raise ValueError("no item contributed a score")
    return score.mean(0)


def head_mean(per_item: list[np.ndarray], method: str) -> np.ndarray:
    """Mean over items of per-item scores [L, H]; none at all is refused."""
    if not per_item:
        raise ValueError(f"{method}: no item contributed a score")
    return np.mean(np.stack(per_item), 0)


# ------------------------------------------------------------------------------------------------ P(correct)


def is_mcq(item: Item) -> bool:
    return item.correct is not None and bool(item.options)


def correct_batch(lm, item: Item) -> Batch:
    """The batch P(correct) is read from: the prompt alone for an MCQ (letter at the last row), else the prompt
    with the item's gold answer teacher-forced."""
    return one_batch(lm, item) if is_mcq(item) else one_batch(lm, item, item.answer)


def p_correct(lm, item: Item, batch: Batch, logits: torch.Tensor) -> torch.Tensor:
    """P(correct) per batch row [B] from logits [B, T, V] of copies of ``batch`` (one item).

    MCQ items: P(correct letter) renormalised over A-D at the last prompt row (the paper's P, helpers.engine.mcq).
    Other items (strips): the teacher-forced probability of the gold answer's tokens, prod_t P(a_t | prompt, a_<t),
    read at the rows before each answer token (the end-of-turn token not included)."""
    if is_mcq(item):
        last = int(batch.last_prompt_index[0])
        probs = letter_probs_from_logits(logits[:, last], option_token_ids(lm.processor.tokenizer))
        return probs[:, item.correct]
    positions = answer_positions(batch).to(logits.device)
    targets = batch.inputs["input_ids"][0].to(logits.device)[positions]  # [A]
    logp = logits[:, positions - 1].float().log_softmax(-1)  # [B, A, V]
    return logp.gather(-1, targets[None, :, None].expand(logits.shape[0], -1, 1))[..., 0].sum(-1).exp()
