"""Train the embedded toy Qwen3-VL from scratch and save it to helpers/toy/model (`make toy-model`).

    .venv/bin/python -m helpers.toy.train [--steps N] [--batch-size B] [--max-minutes M]

The schedule is by step, deterministic by seed; on a slow or shared CPU the `--max-minutes` budget ends
it early (the cosine decay then follows elapsed time; the log records the steps actually run).

Rebuilds tokenizer/processor/config (helpers.toy.build), trains on a mixture of every task on both
synthetic corpora (fresh items each step, seeds >= 10_000), logs the curve to helpers/toy/training_log.csv,
saves fp32 weights + processor with `save_pretrained`, reloads the saved folder and
writes its held-out accuracies to helpers/toy/heldout_accuracy.json.

Curriculum: the describe-every-panel task (answer "1 <label> 2 <label> ...", loss on every answer
token) teaches the model which image tokens belong to which panel number; the ordinal and referring
questions then read that binding out. Mismatched and blank-image MCQ items carry a uniformly random
correct letter, so the model learns to answer them at chance.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import time

import numpy as np
import torch
from transformers import AutoModelForImageTextToText, AutoProcessor, Qwen3VLForConditionalGeneration

from helpers.inputs import build_batch
from helpers.paths import HELPERS, TOY_MODEL
from helpers.stimuli import SyntheticCorpus, build_items
from helpers.toy.build import build_config, build_processor
from helpers.toy.evaluate import evaluate

TOY_DIR = HELPERS / "toy"
LOG_CSV = TOY_DIR / "training_log.csv"
ACCURACY_JSON = TOY_DIR / "heldout_accuracy.json"
TRAIN_SEED_BASE = 10_000
# Phase 1 binds words to places (naming, describe-every-panel, the strip questions); phase 2 adds the
# multiple-choice tasks, whose option lookup a from-scratch model learns only once it can name things.
PHASE1_MIXTURE = {"strip_describe": 0.35, "strip_ord": 0.15, "strip_ref": 0.15, "single_name": 0.35}
MIXTURE = {                    # share of each batch in phase 2
    "strip_describe": 0.15, "strip_ord": 0.10, "strip_ref": 0.10, "single_name": 0.05,
    "grid": 0.15, "grid_oracle": 0.07, "grid_blank": 0.05,
    "single_matched": 0.15, "single_mismatched": 0.05, "text": 0.13,
}


def sample_batch(step: int, batch_size: int, mixture: dict = MIXTURE) -> list:
    """Fresh items for one step: kind counts drawn from `mixture`, corpus cm or co per kind."""
    rng = np.random.default_rng([TRAIN_SEED_BASE, step])
    kinds = list(mixture)
    counts = rng.multinomial(batch_size, [mixture[k] for k in kinds])
    items = []
    for kind, count in zip(kinds, counts):
        n_cm = int(rng.binomial(count, 0.5))
        for corpus_name, n in (("cm", n_cm), ("co", count - n_cm)):
            if n:
                items += build_items(kind, SyntheticCorpus(corpus_name), n, TRAIN_SEED_BASE + step)
    return items


def answer_loss(model, batch) -> torch.Tensor:
    """Cross-entropy on every answer token and the end-of-turn token, averaged over all those tokens of
    the batch (a describe answer, 19 tokens, weighs more than a one-letter answer)."""
    logits = model(**batch.inputs).logits[:, :-1]                           # [B, T-1, V]
    target = batch.inputs["input_ids"][:, 1:]                               # [B, T-1]
    scored = (batch.answer_mask | batch.end_mask)[:, 1:].float()            # [B, T-1]
    token_loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), target, reduction="none")
    return (token_loss * scored).sum() / scored.sum()


def learning_rate(step: int, progress: float, peak: float, warmup: int) -> float:
    """Linear warmup over `warmup` steps, then cosine from peak to peak/10 as progress goes 0 -> 1."""
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def save_model(model, processor):
    """save_pretrained of the fp32 weights (about 8 MB) and of the processor (tokenizer, chat template)."""
    model.config.dtype = torch.float32
    model.save_pretrained(TOY_MODEL)
    processor.save_pretrained(TOY_MODEL)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6000)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--max-minutes", type=float, default=40.0,
                        help="time budget: the schedule follows max(step/steps, elapsed/budget) and stops at 1")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (1 is faster on a shared CPU)")
    parser.add_argument("--phase1-steps", type=int, default=1000, help="steps on PHASE1_MIXTURE before MIXTURE")
    parser.add_argument("--eval-every", type=int, default=600, help="quick evaluation and a checkpoint save")
    parser.add_argument("--n-eval", type=int, default=200, help="held-out items per task for the final JSON")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)

    processor = build_processor()
    model = Qwen3VLForConditionalGeneration(build_config(processor.tokenizer))
    print(f"params: {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M", flush=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, betas=(0.9, 0.98))

    start = time.time()
    log_rows = []
    for step in range(args.steps):
        progress = max(step / args.steps, (time.time() - start) / (60 * args.max_minutes))
        if progress >= 1:
            print(f"time budget of {args.max_minutes} min reached after {step} steps", flush=True)
            break
        model.train()
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, progress, args.lr, warmup=100)
        items = sample_batch(step, args.batch_size, PHASE1_MIXTURE if step < args.phase1_steps else MIXTURE)
        loss = answer_loss(model, build_batch(processor, items, answers=[item.answer for item in items]))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        row = {"step": step + 1, "loss": round(loss.item(), 5), "lr": optimizer.param_groups[0]["lr"],
               "elapsed_s": round(time.time() - start, 1)}
        if (step + 1) % args.eval_every == 0:
            quick = evaluate(model, processor, n_per_kind=24, seed=999)
            row.update({kind: result["value"] for kind, result in quick.items()})
            print(json.dumps(row), flush=True)
            save_model(model, processor)
        elif (step + 1) % 25 == 0:
            print(json.dumps(row), flush=True)
        log_rows.append(row)

    columns = list(dict.fromkeys(key for row in log_rows for key in row))
    with open(LOG_CSV, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(log_rows)

    save_model(model, processor)
    shipped = AutoModelForImageTextToText.from_pretrained(TOY_MODEL)
    results = evaluate(shipped, AutoProcessor.from_pretrained(TOY_MODEL), n_per_kind=args.n_eval)
    summary = {"steps": len(log_rows), "batch_size": args.batch_size, "lr": args.lr,
               "train_seconds": round(time.time() - start, 1), "results": results}
    ACCURACY_JSON.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2), flush=True)


if __name__ == "__main__":
    main()
