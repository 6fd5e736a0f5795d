"""Benchmark of the head-probe engine on CPU: read overhead, batched head-sets, paper-scale projection.

Run from the repo root: ``python -m bench.bench_heads [--tokens 1600 --layers 2 --sets 20]``.
Writes build/bench/heads.json and prints a table. Times are CPU seconds of the process (_cpu_seconds); the
read's modes are timed interleaved in one process (medians over --repeats), each memory figure comes from a
fresh subprocess (peak RSS of the forward minus RSS before it), so numbers do not leak between modes.

Two paper-shaped models, random weights: a text backbone with Qwen3-VL-8B's attention shape (read
overhead) and a Qwen3-VL with that backbone plus a vision tower (S + R head-sets of one item: batched
vs loop). The vision tower is narrow so that its share of one forward (measured and printed) is close
to its FLOP share in Qwen3-VL-8B (``VISION_SHARE_8B``): sharing it is most of what batching saves.
The toy model (``helpers/toy/model``), when present, gets the same two rows on a real strip batch.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import statistics

import torch
from transformers import AutoModelForCausalLM, AutoModelForImageTextToText, Qwen3Config, Qwen3VLConfig

from bench.bench_figures import _interleaved
from bench.paper_counts import paper_forwards
from helpers.engine import (
    ATTENTION,
    HIDE,
    Adapter,
    Intervention,
    LoadedModel,
    Read,
    expand_item,
    load_model,
    probe,
    run_head_sets,
    stack_head_sets,
    wrap_model,
)
from helpers.storage import paths

HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128  # Qwen3-VL-8B's attention shape
VISION_WIDTH = 256  # the paper-shaped VLM's vision tower (see vision_share_8b)


def paper_shaped(layers: int, attn: str):
    """Random Qwen3 text backbone (Qwen3-VL's attention block) with Qwen3-VL-8B's heads (32 query / 8 kv,
    head_dim 128), narrow elsewhere."""
    config = Qwen3Config(
        vocab_size=512,
        hidden_size=1024,
        intermediate_size=2048,
        num_hidden_layers=layers,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=HEAD_DIM,
    )
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=attn).eval()
    return model


class TextOnlyAdapter(Adapter):
    def language_model(self, model):
        return model.model


def loaded(model, layers: int) -> LoadedModel:
    adapter = TextOnlyAdapter(
        family="qwen3_text",
        n_layers=layers,
        n_heads=HEADS,
        n_kv_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        candidate_layers=list(range(layers)),
        image_token_id=-1,
    )
    return LoadedModel(model=model, processor=None, adapter=adapter, name="paper-shaped")


def _inputs(tokens: int, batch: int = 1) -> tuple[dict, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(0, 512, (batch, tokens), generator=generator)
    image = torch.zeros(batch, tokens, dtype=torch.bool)
    image[:, 20 : tokens - 60] = True  # most of the prompt is image tokens, as in the paper
    panel = torch.zeros_like(image)
    panel[:, 200:450] = True
    return {"input_ids": input_ids}, image, panel


def _cpu_seconds() -> float:
    """CPU seconds of this process (all its threads): a load from other processes changes it far less than
    wall-clock time, so the ratios below hold on a shared machine."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def _paper_case(mode: str, tokens: int, layers: int):
    """The paper-shaped text backbone under ``mode``: (model, inputs, Read)."""
    attn = {"sdpa": "sdpa", "eager_attentions": "eager"}.get(mode, ATTENTION)
    model = paper_shaped(layers, attn)
    inputs, image, panel = _inputs(tokens)
    rows = torch.zeros(1, tokens, dtype=torch.bool)
    rows[:, -40:] = True  # a query span of 40 rows (qsp-like)
    return loaded(model, layers), inputs, Read(query_rows=rows, groups={"panel": panel, "image": image})


def toy_strip_batch(lm: LoadedModel, n_items: int):
    """A real batch of ordinal strip questions for the toy: (Batch, Read of query rows -> target panel, image)."""
    from helpers.engine import build_batch
    from helpers.stimuli.corpora import load_corpus, strip_items

    items = strip_items(load_corpus("cm"), n_items, seed=0, query="ord")
    batch = build_batch(lm.processor, items)
    panel = torch.stack(
        [
            lm.adapter.region_mask(batch.inputs, item.boxes[item.target], item.image.size, b)
            for b, item in enumerate(items)
        ]
    )  # [B, T]
    return batch, Read(query_rows=batch.query_mask, groups={"panel": panel, "image": batch.image_mask})


def _toy_case(mode: str, n_items: int):
    """The toy model under ``mode`` on a strip batch: (model, inputs, Read)."""
    lm = load_model("toy")
    batch, read = toy_strip_batch(lm, n_items)
    if mode != "read":
        attn = {"sdpa": "sdpa", "eager_attentions": "eager"}[mode]
        lm = wrap_model(
            AutoModelForImageTextToText.from_pretrained(paths.TOY_MODEL, attn_implementation=attn), lm.processor, "toy"
        )
    return lm, batch.inputs, read


MODES = ("sdpa", "read", "eager_attentions")  # a plain forward, a read, eager attention returning the weights


def _forward(mode: str, lm, inputs, read):
    """One forward in ``mode``: plain (sdpa), read (probe), or eager with output_attentions."""

    def forward():
        with torch.no_grad():
            if mode == "read":
                with probe(lm, read=read):
                    lm.model(**inputs)
            elif mode == "eager_attentions":
                lm.model(**inputs, output_attentions=True)
            else:
                lm.model(**inputs)

    return forward


def _case(mode: str, target: str, size: int, layers: int):
    """``target``: "paper" (size = tokens) or "toy" (size = strips in the batch)."""
    return _paper_case(mode, size, layers) if target == "paper" else _toy_case(mode, size)


def _memory(mode: str, target: str, size: int, layers: int, queue) -> None:
    """Peak extra memory of one forward in ``mode`` (after a warm-up); run in a fresh subprocess."""
    forward = _forward(mode, *_case(mode, target, size, layers))
    forward()  # warm-up
    before = _rss_mib()
    forward()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put({"mode": mode, "peak_extra_mib": max(0.0, peak - before)})


def _times(target: str, size: int, layers: int, repeats: int, queue) -> None:
    """Median CPU seconds of one forward per mode, the modes' forwards interleaved in one process (so that a
    machine slowing down or speeding up changes every mode alike); run in a fresh subprocess."""
    forwards = {mode: _forward(mode, *_case(mode, target, size, layers)) for mode in MODES}
    for forward in forwards.values():
        forward()  # warm-up
    queue.put(_interleaved(forwards, repeats, clock=_cpu_seconds))


def _in_subprocess(target, *args):
    context = mp.get_context("spawn")
    queue = context.Queue()
    worker = context.Process(target=target, args=(*args, queue))
    worker.start()
    result = queue.get()
    worker.join()
    if worker.exitcode != 0:
        raise RuntimeError(f"benchmark worker {target.__name__}{args} failed (exit code {worker.exitcode})")
    return result


def read_overhead(target: str, size: int, layers: int, repeats: int) -> dict:
    """Per mode (sdpa, read, eager + output_attentions): the median time, interleaved in one process, and the
    peak extra memory, each mode in a fresh process; plus the read's ratios."""
    times = _in_subprocess(_times, target, size, layers, repeats)
    results = [{**_in_subprocess(_memory, mode, target, size, layers), "seconds": times[mode]} for mode in MODES]
    by_mode = {r["mode"]: r for r in results}
    return {
        "modes": results,
        "repeats": repeats,
        "read_vs_sdpa_time": by_mode["read"]["seconds"] / by_mode["sdpa"]["seconds"],
        "read_vs_eager_time": by_mode["read"]["seconds"] / by_mode["eager_attentions"]["seconds"],
        "read_vs_eager_memory": by_mode["read"]["peak_extra_mib"]
        / max(by_mode["eager_attentions"]["peak_extra_mib"], 1e-9),
    }


def vision_share_8b(tokens: int) -> float:
    """FLOP share of the vision tower in one Qwen3-VL-8B forward of ``tokens`` tokens, most of them image tokens.

    Vision: 27 blocks, width 1152, MLP 4304, 4 patches per image token, full attention over the patches.
    Text: 36 layers, width 4096, q 32 x 128, kv 8 x 128, MLP 12288 (SwiGLU), vocabulary 151,936 (logits at every row).
    """
    image_tokens = tokens - 80
    patches = 4 * image_tokens
    vision = 27 * (2 * patches * (4 * 1152**2 + 2 * 1152 * 4304) + 4 * patches**2 * 1152)
    text_layer = 2 * tokens * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 12288) + 4 * tokens**2 * 4096
    text = 36 * text_layer + 2 * tokens * 4096 * 151936
    return vision / (vision + text)


def paper_shaped_vlm(layers: int) -> LoadedModel:
    """Random Qwen3-VL: the paper-shaped text backbone and a narrow 1-block vision tower (4 patches per token)."""
    config = Qwen3VLConfig(
        text_config=dict(
            vocab_size=512,
            hidden_size=1024,
            intermediate_size=2048,
            num_hidden_layers=layers,
            num_attention_heads=HEADS,
            num_key_value_heads=KV_HEADS,
            head_dim=HEAD_DIM,
            rope_parameters={
                "rope_type": "default",
                "rope_theta": 5e6,
                "mrope_section": [24, 20, 20],
                "mrope_interleaved": True,
            },
        ),
        vision_config=dict(
            depth=1,
            hidden_size=VISION_WIDTH,
            intermediate_size=4 * VISION_WIDTH,
            num_heads=4,
            out_hidden_size=1024,
            deepstack_visual_indexes=[0],
        ),
        image_token_id=500,
        video_token_id=501,
        vision_start_token_id=502,
        vision_end_token_id=503,
    )
    torch.manual_seed(0)
    model = AutoModelForImageTextToText.from_config(
        config, attn_implementation={"text_config": ATTENTION, "vision_config": "sdpa"}
    )
    return wrap_model(model, name="paper-shaped VLM")


def _vlm_item(tokens: int) -> tuple[dict, torch.Tensor]:
    """One item (20 text tokens, an image of tokens - 80 tokens on a 1-row merged grid, 60 text tokens) and a
    panel's keys [1, T]."""
    grid_w = 2 * ((tokens - 80) // 2)  # patches: 4 x grid_w -> grid_w image tokens
    input_ids = torch.randint(0, 400, (1, 80 + grid_w), generator=torch.Generator().manual_seed(0))
    input_ids[0, 19], input_ids[0, 20 + grid_w] = 502, 503
    input_ids[0, 20 : 20 + grid_w] = 500
    item = {
        "input_ids": input_ids,
        "attention_mask": torch.ones_like(input_ids),
        "pixel_values": torch.randn(4 * grid_w, 3 * 2 * 16 * 16, generator=torch.Generator().manual_seed(1)),
        "image_grid_thw": torch.tensor([[1, 2, 2 * grid_w]]),
        "mm_token_type_ids": (input_ids == 500).long(),
    }
    panel = torch.zeros_like(input_ids, dtype=torch.bool)
    panel[:, 200:450] = True  # a panel's image tokens
    return item, panel


def _random_sets(adapter, n_sets: int, per_layer: int, lowest: int = 0) -> list[list[tuple[int, int]]]:
    """Layer-matched random head-sets: per_layer heads in every candidate layer from ``lowest`` up."""
    generator = torch.Generator().manual_seed(1)
    n_layers = len(adapter.candidate_layers)
    return [
        [
            (l, int(h))
            for l in range(lowest, n_layers)
            for h in torch.randperm(adapter.n_heads, generator=generator)[:per_layer]
        ]
        for _ in range(n_sets)
    ]


@torch.no_grad()
def head_sets_timing(
    lm: LoadedModel, item: dict, keys: torch.Tensor, sets: list, plain: bool = True, repeats: int = 1
) -> dict:
    """One item x len(sets) head-sets, hiding ``keys`` [1, T]: a loop of probe calls, one plain batched
    forward (expand_item + probe) and run_head_sets (vision tower and layers below the first head shared).
    The loop and run_head_sets alternate ``repeats`` times (medians); each run_head_sets call gets fresh copies
    of the item's tensors, so that nothing it remembers from an earlier call is reused."""
    heads = stack_head_sets(lm.adapter, sets)  # [n, L, H]
    n = len(sets)
    lm.model(**item)  # warm-up
    loop_times, fast_times = [], []
    for _ in range(repeats):
        start = _cpu_seconds()
        looped = []
        for i in range(n):
            with probe(lm, intervene=Intervention(heads=heads[i : i + 1], keys=keys, bias=HIDE)):
                looped.append(lm.model(**item).logits[:, -1])
        loop_times.append(_cpu_seconds() - start)
        looped = torch.cat(looped)  # [n, V]
        fresh = {name: value.clone() if isinstance(value, torch.Tensor) else value for name, value in item.items()}
        start = _cpu_seconds()
        fast = run_head_sets(lm, fresh, heads, keys, HIDE)[:, -1]
        fast_times.append(_cpu_seconds() - start)
    loop_s, fast_s = statistics.median(loop_times), statistics.median(fast_times)
    start = _cpu_seconds()
    vision_s = 0.0
    if "pixel_values" in item:
        lm.model.model.get_image_features(item["pixel_values"], image_grid_thw=item["image_grid_thw"])
        vision_s = _cpu_seconds() - start
    start = _cpu_seconds()
    lm.model(**item)
    forward_s = _cpu_seconds() - start
    result = {
        "sets": n,
        "repeats": repeats,
        "first_intervened_layer": min(l for s in sets for l, _ in s),
        "loop_seconds": loop_s,
        "run_head_sets_seconds": fast_s,
        "speedup": loop_s / fast_s,
        "max_abs_diff": float((fast - looped).abs().max()),
        "vision_share_measured": vision_s / forward_s,
        # the speedup if the copies shared only the vision tower and each cost a single call's text part
        "vision_only_ceiling": n / (vision_s / forward_s + n * (1 - vision_s / forward_s)),
    }
    if plain:
        start = _cpu_seconds()
        with probe(lm, intervene=Intervention(heads=heads, keys=keys.expand(n, -1), bias=HIDE)):
            batched = lm.model(**expand_item(item, n)).logits[:, -1]
        plain_s = _cpu_seconds() - start
        result |= {
            "plain_batched_seconds": plain_s,
            "plain_batched_speedup": loop_s / plain_s,
            "plain_max_abs_diff": float((batched - looped).abs().max()),
        }
    return result


def projection(per_forward_loop: float, per_forward_batched: float) -> dict:
    """The paper's forward passes at R = 20/100/250, costed per forward on the paper-shaped VLM.

    Discovery forwards are single reads (no head-sets to share); every other forward is one copy of an
    item in a run_head_sets call (batched) or one probe call (loop).
    """
    out = {}
    for r in (20, 100, 250):
        table = paper_forwards(r)
        total = sum(v["forwards"] for v in table.values())
        reads = next(v["forwards"] for name, v in table.items() if name.startswith("discovery"))
        out[f"R={r}"] = {
            "table": table,
            "forwards": total,
            "cpu_hours_loop": total * per_forward_loop / 3600,
            "cpu_hours_batched": (reads * per_forward_loop + (total - reads) * per_forward_batched) / 3600,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tokens", type=int, default=1600)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--sets", type=int, default=20, help="random head-sets next to S")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved repeats: reads, the toy's S + R")
    parser.add_argument("--repeats-sets", type=int, default=3, help="interleaved repeats of the paper-shaped S + R")
    parser.add_argument("--toy-strips", type=int, default=16, help="strips in the toy model's read batch")
    parser.add_argument("--plain", action="store_true", help="also time the plain batched forward (expand_item)")
    args = parser.parse_args()
    result = {
        "config": vars(args)
        | {
            "heads": HEADS,
            "kv_heads": KV_HEADS,
            "head_dim": HEAD_DIM,
            "vision_width": VISION_WIDTH,
            "vision_share_8b": vision_share_8b(args.tokens),
        }
    }
    result["read_overhead"] = read_overhead("paper", args.tokens, args.layers, args.repeats)
    vlm = paper_shaped_vlm(args.layers)
    item, panel = _vlm_item(args.tokens)
    per_layer = 100 * args.layers // 36 or 1  # the paper's top-100 of 36 layers, scaled
    sets = _random_sets(vlm.adapter, args.sets + 1, per_layer)
    batched = result["batched_head_sets"] = head_sets_timing(vlm, item, panel, sets, args.plain, args.repeats_sets)
    del vlm
    result["projection"] = projection(
        batched["loop_seconds"] / batched["sets"], batched["run_head_sets_seconds"] / batched["sets"]
    )
    if paths.TOY_MODEL.exists():
        result["toy_read_overhead"] = read_overhead("toy", args.toy_strips, 0, args.repeats)
        toy = load_model("toy")
        strips, _ = toy_strip_batch(toy, 1)
        keys = toy.adapter.image_positions(strips.inputs["input_ids"])  # NCS-like: hide every image token
        toy_sets = _random_sets(toy.adapter, args.sets + 1, max(1, 100 * toy.adapter.n_heads // (36 * 32)))
        result["toy_head_sets"] = head_sets_timing(toy, strips.inputs, keys, toy_sets, args.plain, args.repeats)
    paths.BENCH_OUT.mkdir(parents=True, exist_ok=True)
    out = paths.BENCH_OUT / "heads.json"
    out.write_text(json.dumps(result, indent=2))
    _print(args, result)
    print(f"wrote {out}")


def _print(args, result: dict) -> None:
    print(
        f"paper-shaped: {args.layers} layers, {HEADS}q/{KV_HEADS}kv heads, head_dim {HEAD_DIM}, {args.tokens} tokens"
    )
    rows = [("paper-shaped", result["read_overhead"])]
    if "toy_read_overhead" in result:
        rows.append((f"toy ({args.toy_strips} strips)", result["toy_read_overhead"]))
    print(f"{'model':<20}{'mode':<20}{'seconds':>10}{'peak extra MiB':>16}")
    for name, overhead in rows:
        for r in overhead["modes"]:
            print(f"{name:<20}{r['mode']:<20}{r['seconds']:>10.3f}{r['peak_extra_mib']:>16.0f}")
        print(
            f"{name:<20}read / sdpa time {overhead['read_vs_sdpa_time']:.3f}x, read / eager+output_attentions "
            f"time {overhead['read_vs_eager_time']:.3f}x, memory {overhead['read_vs_eager_memory']:.3f}"
        )
    for name, key in (("paper-shaped VLM", "batched_head_sets"), ("toy", "toy_head_sets")):
        if key not in result:
            continue
        b = result[key]
        plain = (
            f"; plain batched {b['plain_batched_seconds']:.2f}s = {b['plain_batched_speedup']:.2f}x"
            if "plain_batched_seconds" in b
            else ""
        )
        print(
            f"{name}: S + {b['sets'] - 1} sets (first head in layer {b['first_intervened_layer']}, vision "
            f"{100 * b['vision_share_measured']:.0f}% of a forward): loop {b['loop_seconds']:.2f}s, run_head_sets "
            f"{b['run_head_sets_seconds']:.2f}s = {b['speedup']:.2f}x (max |diff| {b['max_abs_diff']:.1e}; "
            f"sharing only the vision tower: {b['vision_only_ceiling']:.2f}x){plain}"
        )
    print(f"Qwen3-VL-8B vision FLOP share at {args.tokens} tokens: {100 * result['config']['vision_share_8b']:.0f}%")
    print(
        f"{'projection':<10}{'forwards':>12}{'CPU h loop':>12}{'CPU h batched':>15}"
        f"  (paper-shaped VLM, {args.layers} layers)"
    )
    for name, p in result["projection"].items():
        print(f"{name:<10}{p['forwards']:>12,}{p['cpu_hours_loop']:>12.1f}{p['cpu_hours_batched']:>15.1f}")


if __name__ == "__main__":
    main()
