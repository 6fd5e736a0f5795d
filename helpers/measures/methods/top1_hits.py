"""The top-1-key methods: SparseMM's visual score, OCR heads and the retrieval (copy) score.

Each runs the item's model answer teacher-forced (prompt + greedy answer, as helpers.measures.discovery does: causal
attention makes every row equal to the decoding step's), reads each head's top-1 key at chosen answer rows
(helpers.engine.top_key) and counts a hit when that key lies in a target key set:

    sparsemm   row before each answer token (the row that predicts it); target: the image tokens of the one region
               whose text contains the decoded token; hit += 1 / |region|; sum over steps, mean over items.
    ocr        the answer token's own row, keys restricted to the prompt; target: the asked-about region; a hit
               scores the answer's token-LCS recall, a miss 0; mean over all (item, answer token) entries.
    retrieval  row before each answer token; target: the source span's tokens equal to the generated token (a copy);
               hit += 1 / |span|; sum over steps, mean over the items answered correctly (ROUGE-1 recall > 0.5).

Deviations shared by all three: the answer is re-tokenised from the decoded greedy text (helpers.engine.mcq
.greedy_answers strips it) rather than taken as the generated ids; the attention is the probe's fp32 recomputation
(theirs: eager attentions in the model's dtype).
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import torch

from helpers.engine.item import Item
from helpers.engine.top_key import attention_rows, top_key_positions
from helpers.measures.methods.common import (
    answer_positions,
    model_answers,
    need_items,
    need_regions,
    one_batch,
    positions_mask,
    region_keys,
)


def hit_sum(top: torch.Tensor, targets: list[torch.Tensor], weights) -> np.ndarray:
    """sum_r weights[r] * targets[r][top[:, :, r]] -> [L, H]: each row's hit (its top-1 key position lies in its
    target set, bool [T]) weighted by the row's weight. ``top``: [L, H, R] long key positions."""
    if top.shape[-1] != len(targets) or len(targets) != len(weights):
        raise ValueError(f"{top.shape[-1]} rows, {len(targets)} targets and {len(weights)} weights must agree")
    score = np.zeros(top.shape[:2])
    for r, (target, weight) in enumerate(zip(targets, weights)):
        score += weight * target[top[:, :, r]].double().numpy()
    return score


# ------------------------------------------------------------------------------------------------ SparseMM


def region_texts(item: Item) -> dict[str, str]:
    """Each region's content text (the class it shows): the OCR chunk of SparseMM's synthdog items."""
    return dict(zip(item.boxes, item.labels))


def sparsemm_steps(tokens: list[str], texts: dict[str, str]) -> list[tuple[int, str]]:
    """(answer index, region) of each answer token that is a substring of exactly one region's text (their
    ``count == 1``: "hit and only once in the OCR"); other tokens are skipped."""
    steps = []
    for index, token in enumerate(tokens):
        named = [name for name, text in texts.items() if token in text]
        if len(named) == 1:
            steps.append((index, named[0]))
    return steps


@torch.no_grad()
def sparsemm_item(lm, item: Item, answer: str) -> tuple[np.ndarray, int]:
    """(visual score [L, H] of one item, the number of answer tokens that named a region)."""
    batch = one_batch(lm, item, answer)
    ids = batch.inputs["input_ids"][0]
    positions = answer_positions(batch).tolist()
    tokens = [lm.processor.tokenizer.decode([int(ids[p])]) for p in positions]
    steps = sparsemm_steps(tokens, region_texts(item))
    shape = (len(lm.adapter.candidate_layers), lm.adapter.n_heads)
    if not steps:
        return np.zeros(shape), 0
    rows = positions_mask(ids.shape[0], [positions[i] - 1 for i, _ in steps])
    top = top_key_positions(attention_rows(lm, batch.inputs, rows))  # [L, H, R]
    regions = {name: region_keys(lm, batch, name) for name in {name for _, name in steps}}
    targets = [regions[name] for _, name in steps]
    return hit_sum(top, targets, [1.0 / int(t.sum()) for t in targets]), len(steps)


def sparsemm_score(lm, items, max_new_tokens: int = 24) -> np.ndarray:
    """SparseMM's visual score [L, H]: the mean over items of the per-item sum of 1/|region| hits.

    Source: CR400AF-A/SparseMM, visual_head/qwen_visual_head.py ``decode`` and ``hit_score`` (llava_visual_head.py
    the same), aggregated by sparsemm/sparsemm_utils.py (``np.mean`` over items of each head's per-item score). Their
    items are synthdog OCR pages with the prompt "Provide all the OCR results of this image."; at each greedy step
    the decoded token is matched (substring) against every OCR chunk's text, and when exactly one chunk contains it,
    each head whose top-1 key over ALL keys (attentions[layer][0][head][-1].topk(1): the row that predicts the
    token) lies in that chunk's image tokens scores 1/|chunk tokens|. The chunk's tokens are the merged-grid cells
    its box covers. The scores set SparseMM's per-head KV-cache budgets (no top-k); the paper also masks the top
    visual heads (OCR / VQA accuracy drops).

    Here: the regions are the item's boxes and their texts its labels (a strip's six panels: "red star", ...); the
    region's tokens are those overlapping its box. Deviations: the decoded token is matched as it decodes (a
    leading space included, as theirs; a sub-word piece like "p" can match "purple cross", as in theirs); the
    stimuli's labels replace OCR chunks; a region's tokens are the cells its box overlaps, where their box-to-token
    rule (qwen_visual_head.py: start = floor(x0 / cell), end = floor(x1 / cell) + 1, exclusive) adds a row and a
    column of cells beyond a box whose far edges lie on cell edges (a panel covering 2 x 2 merged cells takes 3 x 3:
    9 tokens, not 4). Refused when no answer token of any item names exactly one region."""
    return sparsemm_combine(sparsemm_per_item(lm, items, max_new_tokens))


def sparsemm_per_item(lm, items, max_new_tokens: int = 24) -> dict[str, np.ndarray]:
    """Per item: "score" [N, L, H] (zeros for an empty answer), "answered" [N] (a non-empty greedy answer) and
    "named" [N] (its answer tokens that named exactly one region)."""
    items = need_items(items, "sparsemm")
    need_regions(lm, "sparsemm")
    answers = model_answers(lm, items, max_new_tokens)
    shape = (len(lm.adapter.candidate_layers), lm.adapter.n_heads)
    scores, answered, named = [], [], []
    for item, answer in zip(items, answers):
        score, n = sparsemm_item(lm, item, answer) if answer else (np.zeros(shape), 0)
        scores.append(score)
        answered.append(bool(answer))
        named.append(n)
    return {"score": np.stack(scores), "answered": np.array(answered), "named": np.array(named)}


def sparsemm_combine(run: dict[str, np.ndarray]) -> np.ndarray:
    """SparseMM's score [L, H] from sparsemm_per_item: the mean over answered items; refused when no step named
    a region."""
    if int(np.sum(run["named"])) == 0:
        raise ValueError(
            "sparsemm: no generated answer token is contained in exactly one region's text (the items' labels), so "
            "no step can score; the method needs answers that read out a region's content (e.g. ordinal strips)"
        )
    return np.asarray(run["score"])[np.asarray(run["answered"], dtype=bool)].mean(0)


# ------------------------------------------------------------------------------------------------ OCR heads


def longest_common_run(gold: list[int], pred: list[int]) -> int:
    """Length of the longest contiguous run shared by two sequences (their longest_common_substring_length)."""
    best, previous = 0, [0] * (len(pred) + 1)
    for g in gold:
        current = [0] * (len(pred) + 1)
        for j, p in enumerate(pred):
            if g == p:
                current[j + 1] = previous[j] + 1
                best = max(best, current[j + 1])
        previous = current
    return best


@torch.no_grad()
def ocr_item(lm, item: Item, answer: str) -> tuple[np.ndarray, int]:
    """(sum over this item's entries [L, H], number of entries): one entry per generated token whose id is among the
    gold answer's token ids."""
    tokenizer = lm.processor.tokenizer
    batch = one_batch(lm, item, answer)
    ids = batch.inputs["input_ids"][0]
    positions = answer_positions(batch)
    gold = tokenizer(item.answer, add_special_tokens=False)["input_ids"]
    matched = [int(p) for p in positions if int(ids[p]) in set(gold)]
    shape = (len(lm.adapter.candidate_layers), lm.adapter.n_heads)
    if not matched:
        return np.zeros(shape), 0
    first_answer = int(positions[0])
    real = batch.inputs["attention_mask"][0].bool()
    # their keys: attn[ans, :-len(generated)], where the key axis ends at the last FED token (the final generated
    # one never is), so the slice keeps the prompt but its last token: the last prompt key is left out, as here
    prompt_keys = real & (torch.arange(ids.shape[0]) < first_answer - 1)
    att = attention_rows(lm, batch.inputs, positions_mask(ids.shape[0], matched), prompt_keys)
    top = top_key_positions(att)
    sequence = ids[real].tolist()[: int(real.sum()) - int(batch.end_mask[0].sum())]  # prompt + answer, as generated
    recall = longest_common_run(gold, sequence) / len(gold)
    region = region_keys(lm, batch, item.target)
    return hit_sum(top, [region] * len(matched), [recall] * len(matched)), len(matched)


def ocr_score(lm, items, max_new_tokens: int = 24) -> np.ndarray:
    """OCR-head score [L, H]: the mean, over every (item, matched answer token) entry, of the answer's LCS recall
    when the head's top-1 key among the prompt's keys but its last at that token's row lies in the asked-about
    region, else 0.

    Source: baekingeol/OCR_Head, step2_ocr_retrieval_head.py ``main`` (coarse-grained branch: one evidence box per
    item), with utils/utils.py ``return_attention`` (the rows of generate's attentions: prefill rows, then one row
    per decoding step, so row P + n is generated token n's OWN row) and ``return_weights`` / ``valuable_weights``
    (the 28-px tiles covering > 0.1 % of the box's area), utils/metrics.py ``compute_score`` (longest common run of
    gold answer ids in the output sequence / gold length). A generated token counts when its id is among the gold
    answer's ids; its head's argmax over the keys ``attn[ans, :-len(generated)]`` (return_attention pads every row
    to the last step's key count, P + G - 1 for G generated tokens as the last is never fed back, so the slice
    keeps the prompt's first P - 1 keys: every prompt key but the last, and so here) in the region appends
    the score, otherwise 0; each head's mean over its entries is its OCR score. step3_extracted_heads.py keeps heads
    with a mean >= 0.1 (and zeroes heads with non-zero entries in > 90 % of cases); the paper validates by masking
    OCR heads (DocVQA accuracy) and by redistributing sink values.

    Here: the evidence box is the item's asked-about region (a strip panel, a grid cell); its tokens those overlapping
    the box. Deviations: the fine-grained branch (one box per answer token, paired by order) is not reproduced; the
    step-3 thresholds are selection, not score. Refused when no generated token is a gold-answer token."""
    return ocr_combine(ocr_per_item(lm, items, max_new_tokens))


def ocr_per_item(lm, items, max_new_tokens: int = 24) -> dict[str, np.ndarray]:
    """Per item: "total" [N, L, H], the sum over its entries (matched answer tokens), and "entries" [N]."""
    items = need_items(items, "ocr")
    need_regions(lm, "ocr")
    answers = model_answers(lm, items, max_new_tokens)
    shape = (len(lm.adapter.candidate_layers), lm.adapter.n_heads)
    totals, entries = [], []
    for item, answer in zip(items, answers):
        total, n = ocr_item(lm, item, answer) if answer else (np.zeros(shape), 0)
        totals.append(total)
        entries.append(n)
    return {"total": np.stack(totals), "entries": np.array(entries)}


def ocr_combine(run: dict[str, np.ndarray]) -> np.ndarray:
    """The OCR score [L, H] from ocr_per_item: the sum over all entries / their number."""
    entries = int(np.sum(run["entries"]))
    if entries == 0:
        raise ValueError("ocr: no generated token is among the gold answers' tokens, so no entry can score")
    return np.asarray(run["total"]).sum(0) / entries


# ------------------------------------------------------------------------------------------------ retrieval (copy)


def rouge1_recall(reference: str, response: str) -> float:
    """ROUGE-1 recall of ``response`` against ``reference`` (lowercase alphanumeric words, clipped counts), as
    rouge_score's default tokenizer without stemming."""

    def words(text: str) -> Counter:
        return Counter(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())

    ref, res = words(reference), words(response)
    if not ref:
        return 0.0
    return sum(min(n, res[w]) for w, n in ref.items()) / sum(ref.values())


@torch.no_grad()
def retrieval_item(lm, item: Item, answer: str) -> tuple[np.ndarray, int]:
    """(retrieval score [L, H] of one item, the number of answer tokens that equal a source-span token)."""
    batch = one_batch(lm, item, answer)
    ids = batch.inputs["input_ids"][0].cpu()
    span = batch.query_mask[0]  # the needle: the prompt words that pick the target
    positions = answer_positions(batch).tolist()
    targets = [span & (ids == ids[p]) for p in positions]
    copies = sum(bool(t.any()) for t in targets)
    shape = (len(lm.adapter.candidate_layers), lm.adapter.n_heads)
    if copies == 0:
        return np.zeros(shape), 0
    rows = positions_mask(ids.shape[0], [p - 1 for p in positions])
    top = top_key_positions(attention_rows(lm, batch.inputs, rows))
    return hit_sum(top, targets, [1.0 / int(span.sum())] * len(positions)), copies


def retrieval_score(lm, items, max_new_tokens: int = 24, min_recall: float = 0.5) -> np.ndarray:
    """Retrieval (copy-paste) score [L, H]: the mean over correctly answered items of the per-item sum of
    1/|span| over the answer steps where the head's top-1 key lies in the source span AND holds the generated token.

    Source: nightdessert/Retrieval_Head, retrieval_head_detection.py ``LLMNeedleHaystackTester.retrieval_calculate``
    (``attention_maxtrix[layer_idx][0][head_idx][-1].topk(1)``: the row that predicts the token, over all keys;
    hit when needle_start <= i < needle_end and the generated id == prompt_ids[i]; += 1/(needle_end - needle_start)),
    ``decode`` (greedy, up to 50 steps) and ``evaluate_and_log`` (accumulated only when ROUGE-1 recall of the response
    against the needle > 50; the head score is np.mean over accumulated items). Heads with score > 0.1 are retrieval
    heads; the paper validates by masking them (needle-in-a-haystack failure) with query_zero.

    Where it applies: answers copied from the prompt. The needle here is the item's query span ("panel 3" in an
    ordinal strip question, "the red star" in a referring one), whose words the answers repeat ("panel 3 ...",
    "red star in panel 3"). Where it does not: an answer read from the image (an ordinal strip's label, a grid's
    letter) cannot be a copy, since an image token never equals a text token; the score then counts only the text
    copies and says nothing of visual retrieval. MCQ letters and items whose answers repeat no source-span token
    are refused. Deviation: the needle is the query span, not an inserted sentence; the gate compares the answer to
    the item's gold answer (theirs: to the needle sentence)."""
    return retrieval_combine(retrieval_per_item(lm, items, max_new_tokens, min_recall), min_recall)


def retrieval_per_item(lm, items, max_new_tokens: int = 24, min_recall: float = 0.5) -> dict[str, np.ndarray]:
    """Per item: "score" [N, L, H] (zeros where not kept), "kept" [N] (answered with ROUGE-1 recall > min_recall)
    and "copies" [N] (answer tokens that repeat a source-span token)."""
    items = need_items(items, "retrieval")
    answers = model_answers(lm, items, max_new_tokens)
    shape = (len(lm.adapter.candidate_layers), lm.adapter.n_heads)
    scores, kept, copies = [], [], []
    for item, answer in zip(items, answers):
        keep = bool(answer) and rouge1_recall(item.answer, answer) > min_recall
        score, n = retrieval_item(lm, item, answer) if keep else (np.zeros(shape), 0)
        scores.append(score)
        kept.append(keep)
        copies.append(n)
    return {"score": np.stack(scores), "kept": np.array(kept), "copies": np.array(copies)}


def retrieval_combine(run: dict[str, np.ndarray], min_recall: float = 0.5) -> np.ndarray:
    """The retrieval score [L, H] from retrieval_per_item: the mean over kept items; refused when none is kept or
    no answer token is a copy."""
    kept = np.asarray(run["kept"], dtype=bool)
    if not kept.any():
        raise ValueError(f"retrieval: no item was answered with ROUGE-1 recall > {min_recall}; nothing accumulates")
    if int(np.sum(run["copies"])) == 0:
        raise ValueError(
            "retrieval: no answer token repeats a token of the item's source span (query span), so no step can be a "
            "copy; the retrieval score applies only to answers copied from the prompt"
        )
    return np.asarray(run["score"])[kept].mean(0)
