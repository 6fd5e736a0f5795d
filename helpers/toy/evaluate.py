"""Held-out accuracies of a model on every task, and the thresholds the shipped toy model must meet.

Strip questions score an exact greedy answer (checked in one teacher-forced pass: the argmax at every
answer position and at the end-of-turn position is the expected token). MCQ arms score P(letter)
renormalised over A-D: accuracy (argmax = correct) for the answerable arms, mean P(correct) for the
mismatched and blank arms, which should sit at chance (0.25).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from helpers.engine.inputs import build_batch
from helpers.engine.mcq import letter_probs, prob_correct
from helpers.measures.pointing_audit import audit_items, audit_summary
from helpers.stimuli import pointing
from helpers.stimuli.corpora import Item, SyntheticCorpus
from helpers.toy.tasks import build_task_items

EVAL_SEED = 777  # training draws its items from seeds >= 10_000
# kind -> (metric, lower bound, upper bound)
THRESHOLDS = {
    "strip_ord": ("accuracy", 0.95, 1.0),
    "strip_ref": ("accuracy", 0.95, 1.0),
    "grid": ("accuracy", 0.90, 1.0),
    "grid_oracle": ("accuracy", 0.95, 1.0),
    "single_matched": ("accuracy", 0.95, 1.0),
    "single_mismatched": ("mean_p_correct", 0.15, 0.35),
    "grid_blank": ("mean_p_correct", 0.15, 0.35),
    "text": ("accuracy", 0.95, 1.0),
}


@torch.no_grad()
def answer_exact_match(model, processor, items: Sequence[Item]) -> torch.Tensor:
    """[B] bool: greedy decoding would produce exactly item.answer followed by the end-of-turn token."""
    batch = build_batch(processor, items, answers=[item.answer for item in items])
    logits = model(**batch.inputs).logits  # [B, T, V]
    predicted = logits[:, :-1].argmax(dim=-1)  # [B, T-1], predicts token t+1
    target = batch.inputs["input_ids"][:, 1:]
    scored = (batch.answer_mask | batch.end_mask)[:, 1:]  # [B, T-1]
    return ((predicted == target) | ~scored).all(dim=1)


def score_items(model, processor, kind: str, items: Sequence[Item]) -> float:
    metric = THRESHOLDS[kind][0]
    if kind.startswith("strip"):
        return answer_exact_match(model, processor, items).float().mean().item()
    probs = letter_probs(model, processor, items)  # [B, 4]
    if metric == "accuracy":
        correct = torch.tensor([item.correct for item in items])
        return (probs.argmax(dim=1) == correct).float().mean().item()
    return prob_correct(probs, items).mean().item()


def evaluate(model, processor, n_per_kind: int = 200, seed: int = EVAL_SEED, batch_size: int = 50) -> dict:
    """{kind: {"metric", "value", "n", "cm", "co", "passes"}}; half the items from each corpus."""
    model.eval()
    results = {}
    for kind, (metric, low, high) in THRESHOLDS.items():
        per_corpus = {}
        for corpus_name in ("cm", "co"):
            items = build_task_items(kind, SyntheticCorpus(corpus_name), n_per_kind // 2, seed)
            values = [
                score_items(model, processor, kind, items[i : i + batch_size])
                for i in range(0, len(items), batch_size)
            ]
            sizes = [len(items[i : i + batch_size]) for i in range(0, len(items), batch_size)]
            per_corpus[corpus_name] = sum(v * s for v, s in zip(values, sizes)) / sum(sizes)
        value = (per_corpus["cm"] + per_corpus["co"]) / 2
        results[kind] = {
            "metric": metric,
            "value": round(value, 4),
            "n": 2 * (n_per_kind // 2),
            "cm": round(per_corpus["cm"], 4),
            "co": round(per_corpus["co"], 4),
            "bounds": [low, high],
            "passes": low <= value <= high,
        }
    return results


def pointing_audit(model, processor, n_per_task: int = 100, seed: int = EVAL_SEED, batch_size: int = 50) -> dict:
    """{task: the pointing suite's leak-audit row (mean P(correct) per variant, flagged, passes), its "plain
    accuracy" and "n"} on `n_per_task` held-out items of each synthetic task: notebook 06's audit
    (helpers.studies.cross_model.pointing, there at seed 0; training draws seeds >= 10_000), without its cache."""
    model.eval()
    audits = {}
    for name, task in pointing.SYNTHETIC.items():
        chunks = [
            audit_items(model, processor, task, seed, start, min(start + batch_size, n_per_task))
            for start in range(0, n_per_task, batch_size)
        ]
        row = audit_summary({key: np.concatenate([chunk[key] for chunk in chunks]) for key in chunks[0]})
        audits[name] = {key: round(v, 4) if isinstance(v, float) else v for key, v in row.items()} | {"n": n_per_task}
    return audits
