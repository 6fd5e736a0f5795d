"""The engine on a GPU, on a model of Qwen3-VL-8B's shape (random weights): its error against the eager oracle
in fp32 and bf16, and what a read, a mask and S + R head-sets cost there.

Run on a CUDA machine from the repo root: ``python -m bench.bench_gpu --out DIR`` (``--small`` builds a narrow
2-layer model, to check the script on a CPU). Writes DIR/gpu.json after each part, so a part that fails or
runs out of time leaves the earlier ones.

- Model: Qwen3-VL-8B's configuration (36 text layers of 32 query / 8 kv heads, head_dim 128, width 4096, MLP
  12288, vocabulary 151,936; a 27-block vision tower of width 1152 with deepstack features at blocks 8, 16, 24),
  random weights (no weights can be downloaded here). Built in fp32 for the oracle check, then cast to bf16.
- Item: 1,600 tokens, of which 1,520 are image tokens (a 38 x 40 merged grid, 6,080 patches) between 20 and
  58 text tokens; the "panel" is a 19 x 20 quarter of the grid; the read and the interventions act at the last
  40 rows (a query span).
- Oracle: tests/oracle.py's eager attention with the intervention's bias written in by hand, on the same
  weights (the model's attention implementation is switched). The error of a clean forward, engine against
  eager, is the floor the intervened errors are read against.
- Costs: CUDA-synchronised wall time, medians; peak memory above the weights (torch.cuda.max_memory_allocated).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import traceback
from pathlib import Path

import torch
from transformers import AutoModelForImageTextToText, Qwen3VLConfig

from bench.paper_counts import paper_forwards
from helpers.engine import ATTENTION, HIDE, Intervention, Read, probe, run_head_sets, stack_head_sets, wrap_model
from tests.oracle import ORACLE, oracle_bias

IMAGE, VIDEO, START, END = 151655, 151656, 151652, 151653  # Qwen3-VL's special token ids
QUERY_ROWS = 40


def qwen3_vl_8b_config(small: bool) -> Qwen3VLConfig:
    """Qwen3-VL-8B-Instruct's shape (its config.json); ``small``: 2 narrow layers with the same head layout."""
    text = dict(
        vocab_size=151936,
        hidden_size=4096,
        intermediate_size=12288,
        num_hidden_layers=36,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        max_position_embeddings=262144,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 5e6,
            "mrope_section": [24, 20, 20],
            "mrope_interleaved": True,
        },
    )
    vision = dict(
        depth=27,
        hidden_size=1152,
        intermediate_size=4304,
        num_heads=16,
        out_hidden_size=4096,
        patch_size=16,
        spatial_merge_size=2,
        temporal_patch_size=2,
        num_position_embeddings=2304,
        deepstack_visual_indexes=[8, 16, 24],
    )
    if small:
        text |= dict(vocab_size=151936, hidden_size=512, intermediate_size=1024, num_hidden_layers=2)
        vision |= dict(depth=2, hidden_size=64, intermediate_size=128, num_heads=4, out_hidden_size=512)
        vision["deepstack_visual_indexes"] = [0]
    return Qwen3VLConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=IMAGE,
        video_token_id=VIDEO,
        vision_start_token_id=START,
        vision_end_token_id=END,
    )


def build(small: bool, device: str):
    """The random fp32 model on ``device``, running the engine's attention in its text backbone."""
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForImageTextToText.from_config(
            qwen3_vl_8b_config(small),
            dtype=torch.float32,
            attn_implementation={"text_config": ATTENTION, "vision_config": "sdpa"},
        )
    return wrap_model(model.eval(), name="Qwen3-VL-8B-shaped")


def item(device: str, grid_h: int = 38, grid_w: int = 40, before: int = 20, after: int = 58):
    """One 1-image prompt: (inputs, panel keys [1, T], query rows [1, T], image keys [1, T])."""
    n_image = grid_h * grid_w
    generator = torch.Generator().manual_seed(0)
    text = torch.randint(0, 150000, (1, before + after), generator=generator)
    input_ids = torch.cat(
        [
            text[:, :before],
            torch.tensor([[START]]),
            torch.full((1, n_image), IMAGE),
            torch.tensor([[END]]),
            text[:, before:],
        ],
        1,
    )  # [1, T]
    patches = 4 * n_image
    inputs = {
        "input_ids": input_ids,
        "attention_mask": torch.ones_like(input_ids),
        "pixel_values": torch.randn(patches, 3 * 2 * 16 * 16, generator=generator),
        "image_grid_thw": torch.tensor([[1, 2 * grid_h, 2 * grid_w]]),
        "mm_token_type_ids": (input_ids == IMAGE).long(),
    }
    image = input_ids == IMAGE
    grid = torch.zeros(grid_h, grid_w, dtype=torch.bool)
    grid[: grid_h // 2, : grid_w // 2] = True  # the panel: a quarter of the image
    panel = torch.zeros_like(image)
    panel[image] = grid.flatten()
    rows = torch.zeros_like(image)
    rows[:, -QUERY_ROWS:] = True
    return {k: v.to(device) for k, v in inputs.items()}, panel.to(device), rows.to(device), image.to(device)


def head_sets(adapter, n_sets: int, per_layer: int, seed: int = 1) -> list[list[tuple[int, int]]]:
    """``n_sets`` head-sets of ``per_layer`` heads in every candidate layer (the paper's top-100 spread over 36
    layers is about 3 per layer)."""
    generator = torch.Generator().manual_seed(seed)
    layers = range(len(adapter.candidate_layers))
    return [
        [(l, int(h)) for l in layers for h in torch.randperm(adapter.n_heads, generator=generator)[:per_layer]]
        for _ in range(n_sets)
    ]


def switched(lm, implementation: str):
    """Run the text backbone's attention through ``implementation`` (the weights stay)."""
    lm.model.set_attn_implementation({"text_config": implementation, "vision_config": "sdpa"})


def last_probabilities(logits: torch.Tensor) -> torch.Tensor:
    return logits[:, -1].float().softmax(-1)  # [B, V]


@torch.no_grad()
def oracle_errors(lm, inputs, panel, rows, image, heads) -> dict:
    """Max abs differences, engine against the eager oracle on the same weights, of the last row's logits and
    probabilities: clean, a read (mass per head and group), a hide (HIDE on the panel) and a steer (+2.5 on it)."""
    switched(lm, ATTENTION)
    out = {}
    with probe(lm, read=Read(query_rows=rows, groups={"panel": panel, "image": image})) as recording:
        clean = lm.model(**inputs).logits[:, -1]
    switched(lm, "eager")
    reference = lm.model(**inputs, output_attentions=True)
    attentions = torch.stack([a.float() for a in reference.attentions], 1)  # [1, L, H, T, T]
    weight = rows[:, None, None, :, None].float()
    eager_mass = torch.stack(
        [
            ((attentions * g[:, None, None, None, :].float()).sum(-1, keepdim=True) * weight).sum(3) / weight.sum(3)
            for g in (panel, image)
        ],
        -1,
    ).squeeze(-2)  # [1, L, H, G]
    del attentions
    out["clean_logits"] = float((clean.float() - reference.logits[:, -1].float()).abs().max())
    out["clean_probability"] = float(
        (clean.float().softmax(-1) - reference.logits[:, -1].float().softmax(-1)).abs().max()
    )
    out["read_mass"] = float((recording.mass.float() - eager_mass).abs().max())
    del reference
    switched(lm, ORACLE)
    for name, bias in (("hide", HIDE), ("steer", 2.5)):
        oracle_bias.clear()
        for candidate, layer in enumerate(lm.adapter.candidate_layers):
            oracle_bias[layer] = (heads[:, candidate], rows, panel, torch.tensor([bias], device=panel.device))
        expected = lm.model(**inputs).logits[:, -1]
        oracle_bias.clear()
        switched(lm, ATTENTION)
        with probe(lm, intervene=Intervention(heads=heads, keys=panel, bias=bias, query_rows=rows)):
            got = lm.model(**inputs).logits[:, -1]
        switched(lm, ORACLE)
        out[f"{name}_logits"] = float((got.float() - expected.float()).abs().max())
        out[f"{name}_probability"] = float((got.float().softmax(-1) - expected.float().softmax(-1)).abs().max())
        out[f"{name}_effect_logits"] = float((got.float() - clean.float()).abs().max())  # it took effect
    switched(lm, ATTENTION)
    return out


def timed(fn, repeats: int, device: str) -> dict:
    """Median wall seconds of ``fn`` after one warm-up, and the peak memory it adds above what was allocated."""
    fn()
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    peak = (torch.cuda.max_memory_allocated() - base) / 2**30 if device == "cuda" else float("nan")
    return {"seconds": statistics.median(times), "peak_extra_gib": peak, "repeats": repeats}


@torch.no_grad()
def forward_costs(lm, inputs, panel, rows, image, repeats: int, device: str) -> dict:
    """One forward: plain sdpa, the engine without a probe, the engine reading, eager returning attentions."""

    def plain():
        lm.model(**inputs)

    def reading():
        with probe(lm, read=Read(query_rows=rows, groups={"panel": panel, "image": image})):
            lm.model(**inputs)

    def eager_attentions():
        lm.model(**inputs, output_attentions=True)

    out = {}
    for name, implementation, fn in (
        ("sdpa", "sdpa", plain),
        ("engine", ATTENTION, plain),
        ("engine_read", ATTENTION, reading),
        ("eager_attentions", "eager", eager_attentions),
    ):
        switched(lm, implementation)
        out[name] = timed(fn, repeats, device)
    switched(lm, ATTENTION)
    out["read_vs_sdpa"] = out["engine_read"]["seconds"] / out["sdpa"]["seconds"]
    out["read_vs_eager_attentions"] = out["engine_read"]["seconds"] / out["eager_attentions"]["seconds"]
    return out


@torch.no_grad()
def head_set_costs(lm, inputs, panel, rows, n_random: int, max_tokens: int, repeats: int, device: str) -> dict:
    """S + ``n_random`` head-sets hiding the panel at ``rows`` ([1, T] or "all"): a loop of probe calls against
    run_head_sets (shared vision tower, layers below the first head and the unchanged prefix; ``max_tokens``
    copies x T per forward), the last row's probabilities compared."""
    oracle_bias.clear()
    switched(lm, ATTENTION)
    sets = head_sets(lm.adapter, n_random + 1, per_layer=3)
    heads = stack_head_sets(lm.adapter, sets, device=device)  # [n, L, H]

    def loop():
        return torch.cat(
            [
                last_probabilities(
                    _probed(lm, inputs, Intervention(heads=heads[i : i + 1], keys=panel, bias=HIDE, query_rows=rows))
                )
                for i in range(len(sets))
            ]
        )

    def batched():
        return last_probabilities(
            run_head_sets(lm, inputs, heads, panel, HIDE, rows, logits_to_keep=1, max_tokens=max_tokens)
        )

    diff = float((loop() - batched()).abs().max())
    loop_cost, batched_cost = timed(loop, repeats, device), timed(batched, repeats, device)
    return {
        "sets": len(sets),
        "max_tokens": max_tokens,
        "loop": loop_cost,
        "run_head_sets": batched_cost,
        "speedup": loop_cost["seconds"] / batched_cost["seconds"],
        "per_copy_seconds": batched_cost["seconds"] / len(sets),
        "max_abs_probability_diff": diff,
    }


def _probed(lm, inputs, intervention):
    with probe(lm, intervene=intervention):
        return lm.model(**inputs).logits


def gpu_hours(per_read: float, per_copy: float) -> dict:
    """The paper's forward passes (bench.paper_counts) at R = 20 / 100 / 250, costed at the measured
    read time and per-copy time of run_head_sets."""
    out = {}
    for r in (20, 100, 250):
        table = paper_forwards(r)
        reads = next(v["forwards"] for name, v in table.items() if name.startswith("discovery"))
        copies = sum(v["forwards"] for v in table.values()) - reads
        out[f"R={r}"] = {"forwards": reads + copies, "gpu_hours": (reads * per_read + copies * per_copy) / 3600}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--small", action="store_true", help="2 narrow layers: a check of the script on a CPU")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "torch": torch.__version__}
    import transformers

    result["transformers"] = transformers.__version__

    def save(part: str, value) -> None:
        result[part] = value
        (args.out / "gpu.json").write_text(json.dumps(result, indent=1))
        print(part, json.dumps(value, indent=1), flush=True)

    def attempt(part: str, compute, into: dict | None = None, key: str | None = None):
        """Save ``compute()`` as ``part`` (or as ``into[key]``, saving ``into`` as ``part``); an error is saved in
        its place, so one failing part leaves the others."""
        try:
            value = compute()
        except Exception as error:  # recorded and reported, the next part still runs
            value = {"error": f"{type(error).__name__}: {error}"[:2000], "traceback": traceback.format_exc()[-3000:]}
            if device == "cuda":
                torch.cuda.empty_cache()
        if into is None:
            save(part, value)
        else:
            into[key] = value
            save(part, into)
        return value

    start = time.perf_counter()
    lm = build(args.small, device)
    grid = (6, 8) if args.small else (38, 40)
    inputs, panel, rows, image = item(device, *grid)
    save(
        "shape",
        {
            "tokens": int(inputs["input_ids"].shape[1]),
            "image_tokens": int(image.sum()),
            "panel_tokens": int(panel.sum()),
            "parameters_b": sum(p.numel() for p in lm.model.parameters()) / 1e9,
            "build_seconds": time.perf_counter() - start,
        },
    )
    heads = stack_head_sets(lm.adapter, head_sets(lm.adapter, 1, per_layer=3), device=device)  # [1, L, H]
    attempt("oracle_fp32", lambda: oracle_errors(lm, inputs, panel, rows, image, heads))
    lm.model.to(torch.bfloat16)
    inputs["pixel_values"] = inputs["pixel_values"].to(torch.bfloat16)
    attempt("oracle_bf16", lambda: oracle_errors(lm, inputs, panel, rows, image, heads))
    attempt("forward_bf16", lambda: forward_costs(lm, inputs, panel, rows, image, args.repeats, device))
    tokens = int(inputs["input_ids"].shape[1])
    sets = {}
    for n_random, per_forward, at in ((20, 1, "query"), (20, 21, "query"), (100, 101, "query"), (20, 21, "all")):
        key = f"S+{n_random} at the {at} rows, {per_forward} copies per forward"
        sets[key] = attempt(
            "head_sets_bf16",
            lambda n_random=n_random, per_forward=per_forward, at=at: head_set_costs(
                lm,
                inputs,
                panel,
                rows if at == "query" else "all",
                n_random,
                per_forward * tokens,
                max(1, args.repeats // 2),
                device,
            ),
            into=sets,
            key=key,
        )
    read_seconds = result.get("forward_bf16", {}).get("engine_read", {}).get("seconds", float("nan"))
    per_copy = {key: value["per_copy_seconds"] for key, value in sets.items() if "per_copy_seconds" in value}
    save("paper_protocol_gpu_hours", {key: gpu_hours(read_seconds, seconds) for key, seconds in per_copy.items()})
    save("total_seconds", time.perf_counter() - start)


if __name__ == "__main__":
    main()
