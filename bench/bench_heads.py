"""Benchmark of the head-probe engine on CPU: read overhead, batched head-sets, paper-scale projection.

Run from the repo root: ``python -m bench.bench_heads [--tokens 1600 --layers 2 --sets 20]``.
Writes build/bench/heads.json and prints a table. Each memory figure comes from a fresh subprocess
(peak RSS of the forward minus RSS before it), so numbers do not leak between modes.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import time

import torch
from transformers import AutoModelForCausalLM, Qwen3Config

from helpers import paths
from helpers.heads import ATTENTION, HIDE, Intervention, Read, expand_item, probe, stack_head_sets
from helpers.models import Adapter, LoadedModel

HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128  # Qwen3-VL-8B's attention shape


def paper_shaped(layers: int, attn: str):
    """Random Qwen3 text backbone (Qwen3-VL's attention block) with Qwen3-VL-8B's heads (32 query / 8 kv, head_dim 128), narrow elsewhere."""
    config = Qwen3Config(vocab_size=512, hidden_size=1024, intermediate_size=2048, num_hidden_layers=layers,
                         num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=attn).eval()
    return model


class TextOnlyAdapter(Adapter):
    def language_model(self, model):
        return model.model


def loaded(model, layers: int) -> LoadedModel:
    adapter = TextOnlyAdapter(family="qwen3_text", n_layers=layers, n_heads=HEADS, n_kv_heads=KV_HEADS,
                              head_dim=HEAD_DIM, candidate_layers=list(range(layers)), image_token_id=-1)
    return LoadedModel(model=model, processor=None, adapter=adapter, name="paper-shaped")


def _inputs(tokens: int, batch: int = 1) -> tuple[dict, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(0, 512, (batch, tokens), generator=generator)
    image = torch.zeros(batch, tokens, dtype=torch.bool)
    image[:, 20:tokens - 60] = True                      # most of the prompt is image tokens, as in the paper
    panel = torch.zeros_like(image)
    panel[:, 200:450] = True
    return {"input_ids": input_ids}, image, panel


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def _measure(mode: str, tokens: int, layers: int, repeats: int, queue) -> None:
    """Time (best of repeats) and peak extra memory of one forward in ``mode``; run in a subprocess."""
    torch.set_num_threads(torch.get_num_threads())
    attn = {"sdpa": "sdpa", "eager_attentions": "eager"}.get(mode, ATTENTION)
    model = paper_shaped(layers, attn)
    inputs, image, panel = _inputs(tokens)
    lm = loaded(model, layers)
    rows = torch.zeros(1, tokens, dtype=torch.bool)
    rows[:, -40:] = True                                 # a query span of 40 rows (qsp-like)

    def forward():
        with torch.no_grad():
            if mode == "read":
                with probe(lm, read=Read(rows=rows, groups={"panel": panel, "image": image})):
                    model(**inputs)
            elif mode == "eager_attentions":
                model(**inputs, output_attentions=True)
            else:
                model(**inputs)
    forward()                                            # warm-up
    before = _rss_mib()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        forward()
        best = min(best, time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put({"mode": mode, "seconds": best, "peak_extra_mib": max(0.0, peak - before)})


def read_overhead(tokens: int, layers: int, repeats: int) -> list[dict]:
    context = mp.get_context("spawn")
    results = []
    for mode in ("sdpa", "read", "eager_attentions"):
        queue = context.Queue()
        worker = context.Process(target=_measure, args=(mode, tokens, layers, repeats, queue))
        worker.start()
        worker.join()
        if worker.exitcode != 0:
            raise RuntimeError(f"benchmark worker for mode {mode!r} failed (exit code {worker.exitcode})")
        results.append(queue.get())
    return results


@torch.no_grad()
def batched_head_sets(tokens: int, layers: int, n_random: int) -> dict:
    """S + n_random layer-matched random sets, steering one item: one batched forward vs a loop."""
    lm = loaded(paper_shaped(layers, ATTENTION), layers)
    item, image, panel = _inputs(tokens)
    generator = torch.Generator().manual_seed(1)
    per_layer = 100 * layers // 36 or 1                  # the paper's top-100 of 36 layers, scaled
    sets = [[(l, int(h)) for l in range(layers) for h in torch.randperm(HEADS, generator=generator)[:per_layer]]
            for _ in range(n_random + 1)]
    heads = stack_head_sets(lm.adapter, sets)            # [n_random + 1, L, H]
    n = len(sets)
    batch = expand_item(item, n)
    start = time.perf_counter()
    with probe(lm, intervene=Intervention(heads=heads, keys=panel.expand(n, -1), bias=HIDE)):
        batched = lm.model(**batch).logits[:, -1]
    batched_s = time.perf_counter() - start
    start = time.perf_counter()
    looped = []
    for i in range(n):
        with probe(lm, intervene=Intervention(heads=heads[i:i + 1], keys=panel, bias=HIDE)):
            looped.append(lm.model(**item).logits[:, -1])
    loop_s = time.perf_counter() - start
    return {"sets": n, "batched_seconds": batched_s, "loop_seconds": loop_s, "speedup": loop_s / batched_s,
            "max_abs_diff": float((batched - torch.cat(looped)).abs().max())}


def paper_forwards(n_random: int) -> dict:
    """Forward passes (item x head-set) of the paper's protocol, and how many batched calls they need."""
    settings, items, sets = 12, 400, n_random + 1
    counts = {
        "discovery (12 settings x N=400, one read each)": (settings * items, settings * items),
        "CERS (S+R sets x 2 steer targets)": (settings * items * sets * 2, settings * items * 2),
        "NCS (S+R x matched/mismatched + 2 baselines)": (settings * items * (sets * 2 + 2), settings * items * 4),
        "beta sweep (5 betas x 4 settings x N=200, S+5)": (5 * 4 * 200 * 6 * 2, 5 * 4 * 200 * 2),
        "controls (generic damage, 8 sets, 4 row groups)": (12 * items * 8 * 4 * 2, 12 * items * 4 * 2),
    }
    return {name: {"forwards": f, "batched_calls": c} for name, (f, c) in counts.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tokens", type=int, default=1600)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--sets", type=int, default=20, help="random head-sets next to S")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    overhead = read_overhead(args.tokens, args.layers, args.repeats)
    by_mode = {r["mode"]: r for r in overhead}
    batched = batched_head_sets(args.tokens, args.layers, args.sets)
    per_forward_loop = batched["loop_seconds"] / batched["sets"]
    per_forward_batched = batched["batched_seconds"] / batched["sets"]
    projection = {}
    for r in (20, 100, 250):
        table = paper_forwards(r)
        total = sum(v["forwards"] for v in table.values())
        projection[f"R={r}"] = {"table": table, "forwards": total,
                                "cpu_hours_loop": total * per_forward_loop / 3600,
                                "cpu_hours_batched": total * per_forward_batched / 3600}
    result = {"config": vars(args) | {"heads": HEADS, "kv_heads": KV_HEADS, "head_dim": HEAD_DIM},
              "read_overhead": overhead,
              "read_vs_sdpa_time": by_mode["read"]["seconds"] / by_mode["sdpa"]["seconds"],
              "read_vs_eager_memory": by_mode["read"]["peak_extra_mib"] / max(by_mode["eager_attentions"]["peak_extra_mib"], 1e-9),
              "batched_head_sets": batched, "projection": projection,
              "toy_model": "not measured: " + ("present" if paths.TOY_MODEL.exists() else "helpers/toy/model absent")}
    paths.BENCH_OUT.mkdir(parents=True, exist_ok=True)
    out = paths.BENCH_OUT / "heads.json"
    out.write_text(json.dumps(result, indent=2))
    print(f"paper-shaped: {args.layers} layers, {HEADS}q/{KV_HEADS}kv heads, head_dim {HEAD_DIM}, {args.tokens} tokens")
    print(f"{'mode':<22}{'seconds':>10}{'peak extra MiB':>16}")
    for r in overhead:
        print(f"{r['mode']:<22}{r['seconds']:>10.3f}{r['peak_extra_mib']:>16.0f}")
    print(f"read / sdpa time: {result['read_vs_sdpa_time']:.3f}x; read / eager+output_attentions memory: "
          f"{result['read_vs_eager_memory']:.3f}")
    print(f"S + {args.sets} sets: batched {batched['batched_seconds']:.2f}s, loop {batched['loop_seconds']:.2f}s, "
          f"speedup {batched['speedup']:.2f}x (max |diff| {batched['max_abs_diff']:.1e})")
    print(f"{'projection':<10}{'forwards':>12}{'CPU h loop':>12}{'CPU h batched':>15}  (this config, per item-set)")
    for name, p in projection.items():
        print(f"{name:<10}{p['forwards']:>12,}{p['cpu_hours_loop']:>12.1f}{p['cpu_hours_batched']:>15.1f}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
