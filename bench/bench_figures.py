"""Benchmark of what `make figures` spends its time on, on the toy at one thread per process.

    python -m bench.bench_figures [--repeats 5]

Every comparison is timed inside one run, its two sides interleaved (A, B, A, B, ...) and summarised by
their medians, in CPU seconds of the processes doing the work (the machine may be shared: CPU time is
what a load from other processes changes least):

- the exact cuts, one by one, per item of a CERS run (S + 20 sets steered to c and to d, 42 copies) and
  of an NCS arm (21 copies): the clean forward per call, the output head at every row, the stimuli
  re-rendered per chunk, the processor call per run; each cut's factor on the per-item time;
- an NCS call at every row, the prompt's rows or the last row: the copies run only the rows after those no copy
  changes (before the image, before the prompt's rows), against whole copies;
- the per-copy time of run_head_sets against the fp32 matmul-peak floor (the copy's matmul FLOPs at the
  peak measured here) and the fixed cost per call; where an NCS call's time goes (the decoder layers, their
  attention, the rest outside the layers), each part per copy against its matmuls' floor and fixed per call, on the
  engine's path (the attention inside each compiled layer's graph) beside the path before (eager attention);
- one worker against N on the chunks of one steering run (fresh caches each time): the wall-clock ratio,
  and the speed-up N idle cores would give, N x CPU(1 worker) / CPU(N workers, children included);
- the projected `make figures` time: each notebook's planned copies (helpers/runner/steps.py) at the measured
  per-copy time, divided by the idle-core speed-up of the workers;
- bf16 on CPU (the `dtype` parameter) against fp32: the NCS call's time and the largest deviation of
  the letter probabilities over a few items;
- the default toy (2 x 2 image tokens per region) against `toy-modular` (one token per region, the default
  before), same 8 x 16 heads and head-sets: an NCS call, a CERS call and a discovery forward on one strip, and
  the image tokens of each item: what the graded default costs `make figures`;
- the kernels under each copy, one against the other on an NCS and a CERS call: glibc's allocator keeping
  freed activations against its defaults (two processes each, alternated), the small-attention path against
  sdpa, torch.compile'd decoder layers against eager ones (with the largest deviation of the probabilities);
- compiled layers with one symbol per dynamic size against dynamo's duck sizing, on an NCS call whose forwards hold
  as many copies as rows (two fresh processes each, alternated);
- one layer's attention as the compiled layers run it (two batched matmuls around a softmax) against torch's
  flex_attention, each compiled, on the first intervened layer's real mask, gate, addend and continued keys of the
  NCS and the CERS call (random queries, keys and values), with the largest deviation of the outputs.

Everything after the kernels runs with compiled decoder layers, as notebooks 03-05 do by default.

Writes build/bench/figures.json and prints a table.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager, nullcontext
from unittest import mock

import numpy as np
import torch
from transformers import AttentionInterface
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from helpers.engine import HIDE, attention, build_batch, compile_decoder_layers, copy_ledger, load_model, run_head_sets
from helpers.engine import compiled as compiled_layers
from helpers.engine.mcq import letter_probs, letter_probs_under
from helpers.measures import steering
from helpers.measures.controls import layer_matched_sets, with_controls
from helpers.runner.floor import matmul_peak
from helpers.runner.params import declared_parameters
from helpers.runner.steps import STEPS
from helpers.stimuli.corpora import grid_items, items_of, load_corpus, single_image_items, strip_items
from helpers.stimuli.design import SETTINGS
from helpers.storage import paths, workers
from helpers.storage.cache import ResultCache
from helpers.storage.headsets import load_settings

RENDERS_PER_ITEM = 5.5  # chunks of 10 of 100 items, each rendering items 0..stop: 550 renders per 100 items


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its reaped children (forked workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _interleaved(calls: dict, repeats: int, clock=_cpu_seconds) -> dict[str, float]:
    """Median seconds (of `clock`) of each call, the calls run in turn `repeats` times."""
    times = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            start = clock()
            call()
            times[name].append(clock() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def _sets(lm, n_random: int = 20) -> np.ndarray:
    """[1 + n_random, L, H]: co-ref-qsp's S and n_random layer-matched random sets (the published head-set)."""
    n_layers, n_heads = len(lm.adapter.candidate_layers), lm.adapter.n_heads
    head_set = load_settings(paths.DATA / "headsets", SETTINGS, "toy", n_layers, n_heads, "")["co-ref-qsp"]
    return with_controls(head_set, layer_matched_sets(head_set, n_random, (0, 1)))


def cuts(lm, repeats: int) -> dict:
    """Per-item seconds of each part the cuts remove, and each cut's factor on a CERS and an NCS item."""
    sets = torch.as_tensor(_sets(lm))
    corpus = load_corpus("co")
    grid = grid_items(corpus, 1, 0)[0]  # the render timed below is a grid's, the dearer kind
    single = single_image_items(corpus, 1, 0, "matched")[0]
    grid_batch, single_batch = build_batch(lm.processor, [grid]), build_batch(lm.processor, [single])
    keys = steering.cell_keys(lm, grid_batch, grid, grid.correct)
    steer_sets = torch.cat([sets, sets])  # [42, L, H]: to c and to d

    def cers_call(keep: int):
        return lambda: run_head_sets(lm, grid_batch.inputs, steer_sets, keys, 10.0, logits_to_keep=keep)

    def ncs_call(head_sets: torch.Tensor, keep: int = 0):
        return lambda: run_head_sets(lm, single_batch.inputs, head_sets, single_batch.image_mask, HIDE, "all", keep)

    t = _interleaved(
        {
            "cers call, output head at every row": cers_call(0),
            "cers call, output head at the last row": cers_call(1),
            "ncs call, output head at every row": ncs_call(sets),
            "ncs call, output head at the last row": ncs_call(sets, 1),
            "one-set call": ncs_call(sets[:1]),
            "clean forward": lambda: letter_probs(lm.model, lm.processor, single_batch),
            "processor call": lambda: build_batch(lm.processor, [single]),
            "render one grid item": lambda: grid_items(corpus, 1, 0),
        },
        repeats,
    )
    out = {"seconds": t}
    for kind, copies in (("cers", 42), ("ncs", 21)):
        full, last = t[f"{kind} call, output head at every row"], t[f"{kind} call, output head at the last row"]
        render = RENDERS_PER_ITEM * t["render one grid item"]
        parts = {  # what each cut removes from one item's work, in the order they were made
            "clean probabilities once per item": t["clean forward"],
            "output head only at the answer row": full - last,
            "stimuli rendered once per process": render,
            "processor call once per item": t["processor call"],
        }
        before = full + t["clean forward"] + render + t["processor call"]
        left, factors = before, {}
        for name, saved in parts.items():
            factors[name] = left / (left - saved)
            left -= saved
        out[kind] = {
            "copies": copies,
            "item_seconds_before": before,
            "item_seconds_after": left,
            "factors": factors,
            "factor": before / left,
            "per_copy_seconds": last / copies,
        }
    per_copy = (t["ncs call, output head at every row"] - t["one-set call"]) / 20  # t(n) = fixed + n * per_copy
    out["fixed_seconds_per_call"] = t["one-set call"] - per_copy
    return out


def prefix_rows(lm, repeats: int) -> dict:
    """An NCS call (S + 20 sets) that hides the image at every row, the prompt's rows or the last row: the copies
    running only the rows after the unchanged ones (before the image, or before the prompt's rows), continuing
    the clean item's keys and values (recorded once per item), against whole copies (the adapter's
    continues_from_cache turned off); seconds, factor and max |P_prefix - P_whole| over a few items."""
    sets = torch.as_tensor(_sets(lm))
    items = single_image_items(load_corpus("co"), 4, 0, "matched")
    batches = [build_batch(lm.processor, [item]) for item in items]
    out = {}
    for rows in ("all", "prompt", "last"):

        def probs(batch, whole: bool, rows=rows):
            with mock.patch.object(type(lm.adapter), "continues_from_cache", not whole):
                return letter_probs_under(lm, batch, sets, batch.image_mask, HIDE, rows)  # [21, 4]

        deviation = max(float((probs(b, False) - probs(b, True)).abs().max()) for b in batches)
        calls = {"whole": lambda: probs(batches[0], True), "prefix": lambda: probs(batches[0], False)}
        t = _interleaved(calls, repeats)
        out[rows] = {"seconds": t, "factor": t["whole"] / t["prefix"], "max_abs_deviation": deviation}
    return out


def matmul_floor(lm) -> dict:
    """fp32 matmul FLOPs of one copy of an NCS item through the decoder, the projections' (q, k, v, o and the
    MLP) and the attention's (q k^T and the weights times v), and the seconds they take at the matmul peak of one
    core measured here as a full run measures it (helpers.runner.floor.matmul_peak)."""
    tokens = _ncs_batch(lm).inputs["input_ids"].shape[1]
    projections, scores = _copy_flops(lm, tokens, tokens)
    peak = matmul_peak()  # the runner's peak, so the call's ratio reads like the run's (run.json's floor)
    return {
        "tokens": tokens,
        "flops_per_copy": projections + scores,
        "projection_flops_per_copy": projections,
        "attention_flops_per_copy": scores,
        "peak_flops": peak,
        "floor_seconds_per_copy": (projections + scores) / peak,
    }


def _ncs_batch(lm):
    """The bench's NCS item: the first matched single-image item of the co corpus, built."""
    return build_batch(lm.processor, single_image_items(load_corpus("co"), 1, 0, "matched"))


def _copy_flops(lm, rows: int, keys: int) -> tuple[float, float]:
    """Matmul FLOPs of one copy through every decoder layer at ``rows`` query rows over ``keys`` keys, as the run's
    copy ledger counts them (copy_ledger.layer_flops): (the projections and MLP, the attention's two matmuls)."""
    vocab = lm.model.get_output_embeddings().weight.shape[0]
    shape = copy_ledger.text_shape(lm.adapter.language_model(lm.model).config, vocab)
    projections = shape["layers"] * copy_ledger.layer_flops(shape, rows, 0)  # no keys: the attention's terms are 0
    return projections, shape["layers"] * copy_ledger.layer_flops(shape, rows, keys) - projections


def _timed(spent: collections.Counter, part: str, call):
    """``call``, adding the CPU seconds inside it to ``spent[part]``."""

    def wrapper(*args, **kwargs):
        began = time.process_time()
        try:
            return call(*args, **kwargs)
        finally:
            spent[part] += time.process_time() - began

    return wrapper


@contextmanager
def _timed_parts(lm, spent: collections.Counter, timed_attention=None):
    """While open, adds to ``spent`` the CPU seconds inside the text backbone's decoder layers ("layers"), and
    registers ``timed_attention`` (one function object for every call: the compiled layers' guards hold it) in
    place of the attention function, which takes the attention out of the layers' graphs."""
    layers = lm.adapter.language_model(lm.model).layers
    registered = ALL_ATTENTION_FUNCTIONS[attention.ATTENTION]
    forwards = [layer.forward for layer in layers]
    for layer in layers:
        layer.forward = _timed(spent, "layers", layer.forward)
    if timed_attention is not None:
        AttentionInterface.register(attention.ATTENTION, timed_attention)
    try:
        yield
    finally:
        for layer, forward in zip(layers, forwards):
            layer.forward = forward
        AttentionInterface.register(attention.ATTENTION, registered)


IN_GRAPH, EAGER = "attention inside each layer's graph", "attention in eager Python (the path before)"
WARM_UP = 2  # rounds of calls before the timed ones: one call at 1 copy after one at 21 still compiles a kind


def call_parts(lm, floor: dict, repeats: int) -> dict:
    """Where an NCS call's CPU time goes, at 1 and at 21 copies (S + 20 sets, hidden image at every row), on the
    path the engine takes (IN_GRAPH: the attention traced into each compiled decoder layer) and the one before
    (EAGER: the attention as eager Python between two compiled regions of each layer), one after the other: the whole
    call; the decoder layers (IN_GRAPH: with their attention; EAGER: without it, the projections, norms, rotary
    embedding and MLP, and the attention function apart); everything outside the layers (embedding, the clean
    item's record, the output head, the engine's Python). Each part as t(n) = fixed + n x per copy, beside the
    floors of its matmuls."""
    batch = _ncs_batch(lm)
    tokens = batch.inputs["input_ids"].shape[1]
    # the copies run rows [p0, T) after the rows before the first hidden key (run_head_sets' unchanged prefix): the
    # floor counts those rows at every layer, as the run's copy ledger does (the last layer's kept row not apart)
    start = int(batch.image_mask[0].nonzero()[0])
    projections, scores = (flops / floor["peak_flops"] for flops in _copy_flops(lm, tokens - start, tokens))
    floors = {
        IN_GRAPH: {"whole call": projections + scores, "layers with their attention": projections + scores},
        EAGER: {
            "whole call": projections + scores,
            "layers without their attention": projections,
            "attention": scores,
        },
    }
    sets = torch.as_tensor(_sets(lm))
    spent = {(path, n): collections.Counter() for path in floors for n in (1, 21)}
    attention_time = collections.Counter()
    timed_attention = torch.compiler.disable(
        _timed(attention_time, "attention", ALL_ATTENTION_FUNCTIONS[attention.ATTENTION])
    )
    for path in floors:  # one path after the other: the layers' graphs recompile when the registration changes
        eager = path == EAGER
        with (
            mock.patch.object(attention, "in_graph_inputs", lambda *a: None) if eager else nullcontext(),
            _timed_parts(lm, layer_time := collections.Counter(), timed_attention if eager else None),
        ):
            for repeat in range(WARM_UP + repeats):  # the first rounds compile each kind of call
                for n in (1, 21):
                    layer_time.clear(), attention_time.clear()
                    began = time.process_time()
                    run_head_sets(lm, batch.inputs, sets[:n], batch.image_mask, HIDE, "all", 1)
                    if repeat >= WARM_UP:
                        spent[(path, n)]["whole call"] += time.process_time() - began
                        spent[(path, n)].update(layer_time + attention_time)
    out = {}
    for path, parts in floors.items():
        per_call = {}
        for n in (1, 21):
            t = {name: seconds / repeats for name, seconds in spent[(path, n)].items()}  # per call
            per_call[n] = {"whole call": t["whole call"], "outside the layers": t["whole call"] - t["layers"]}
            if path == EAGER:
                without = t["layers"] - t["attention"]
                per_call[n] |= {"layers without their attention": without, "attention": t["attention"]}
            else:
                per_call[n] |= {"layers with their attention": t["layers"]}
        out[path] = {}
        for part in per_call[1]:
            per_copy = (per_call[21][part] - per_call[1][part]) / 20
            out[path][part] = {
                "per_copy_seconds": per_copy,
                "fixed_seconds": per_call[1][part] - per_copy,
                "floor_seconds_per_copy": parts.get(part, 0.0),
            }
    return out


def worker_speedup(lm, n_workers: int, repeats: int) -> dict:
    """Seconds to compute 2 x n_workers chunks of a steering run (fresh cache) at 1 worker and at n_workers."""
    sets = _sets(lm)
    n_items = 2 * n_workers * 2  # chunks of 2 items
    items_of("grid", "co", n_items, 0)  # rendered before timing, as after the first run of a notebook

    def run(n: int) -> None:
        import os

        os.environ[workers.WORKERS_ENV] = str(n)
        with tempfile.TemporaryDirectory() as folder:
            steering.steering_run(lm, "co", n_items, 0, sets, 10.0, "all", ResultCache(folder), chunk=2)

    calls = {"1 worker": lambda: run(1), f"{n_workers} workers": lambda: run(n_workers)}
    wall, cpu = _interleaved(calls, repeats, time.perf_counter), _interleaved(calls, repeats)
    return {
        "wall_seconds": wall,
        "cpu_seconds": cpu,
        "wall_speedup": wall["1 worker"] / wall[f"{n_workers} workers"],
        "speedup": n_workers * cpu["1 worker"] / cpu[f"{n_workers} workers"],
        "workers": n_workers,
    }


def projection(per_copy: dict, n_workers: int, speedup: float) -> dict:
    """make figures' copies per notebook (helpers/runner/steps.py, at the notebooks' defaults) at the measured
    per-copy time (CERS items for 03, NCS items otherwise), and the total at n_workers."""
    out = {}
    for notebook in ("03_cers", "04_ncs", "05_controls"):
        copies = STEPS[notebook].planned_forwards(declared_parameters(notebook))
        seconds = copies * per_copy["cers" if notebook == "03_cers" else "ncs"]
        out[notebook] = {"copies": copies, "seconds_one_worker": seconds, "seconds": seconds / speedup}
    out["total_minutes"] = sum(v["seconds"] for v in out.values()) / 60
    out["workers"] = n_workers
    return out


def bf16(lm, repeats: int) -> dict:
    """An NCS call (S + 20 sets, image hidden) in bf16 against fp32: seconds and max |P_bf16 - P_fp32|."""
    half = load_model("toy", dtype="bfloat16")
    sets = torch.as_tensor(_sets(lm))
    items = single_image_items(load_corpus("co"), 4, 0, "matched")
    batches = [build_batch(lm.processor, [item]) for item in items]

    def probs(model, batch):
        return letter_probs_under(model, batch, sets, batch.image_mask, HIDE)  # [21, 4]

    deviation = max(float((probs(half, b) - probs(lm, b)).abs().max()) for b in batches)
    t = _interleaved({"fp32": lambda: probs(lm, batches[0]), "bf16": lambda: probs(half, batches[0])}, repeats)
    return {"seconds": t, "speedup": t["fp32"] / t["bf16"], "max_abs_deviation": deviation, "items": len(items)}


def graded_cost(repeats: int) -> dict:
    """Per-call seconds of the default (graded) toy against toy-modular (both compiled, as 03-05 run), on the same
    head-sets, items and rows, and each item's image tokens."""
    models = {"modular": load_model("toy-modular"), "graded": load_model("toy")}
    corpus = load_corpus("co")
    items = {"single": single_image_items(corpus, 1, 0, "matched")[0], "grid": grid_items(corpus, 1, 0)[0]}
    items["strip"] = strip_items(corpus, 1, 0, "ref")[0]
    calls, tokens = {}, {}
    for name, lm in models.items():
        compile_decoder_layers(lm)
        sets = torch.as_tensor(_sets(lm))
        batches = {kind: build_batch(lm.processor, [item]) for kind, item in items.items()}
        tokens[name] = {kind: int(b.image_mask.sum()) for kind, b in batches.items()}
        single, grid = batches["single"], batches["grid"]
        keys = steering.cell_keys(lm, grid, items["grid"], items["grid"].correct)
        calls[(name, "ncs")] = lambda lm=lm, b=single, s=sets: run_head_sets(
            lm, b.inputs, s, b.image_mask, HIDE, "all", 1
        )
        calls[(name, "cers")] = lambda lm=lm, b=grid, s=sets, k=keys: run_head_sets(
            lm, b.inputs, torch.cat([s, s]), k, 10.0, logits_to_keep=1
        )
        calls[(name, "strip forward")] = lambda lm=lm, b=batches["strip"]: lm.model(**b.inputs)
    with torch.no_grad():
        _interleaved(calls, 1)  # the compiled layers' first calls trace and compile
        t = _interleaved(calls, repeats)
    kinds = ("ncs", "cers", "strip forward")
    return {
        "image_tokens": tokens,
        "seconds": {name: {kind: t[(name, kind)] for kind in kinds} for name in models},
        "factor": {kind: t[("graded", kind)] / t[("modular", kind)] for kind in kinds},
    }


def _calls(lm) -> dict:
    """An NCS call (S + 20 sets, image hidden at every row) and a CERS call (the same sets steered to two cells)."""
    sets = torch.as_tensor(_sets(lm))
    corpus = load_corpus("co")
    grid = grid_items(corpus, 1, 0)[0]
    single = build_batch(lm.processor, single_image_items(corpus, 1, 0, "matched"))
    grid_batch = build_batch(lm.processor, [grid])
    to_c, to_d = (steering.cell_keys(lm, grid_batch, grid, cell) for cell in (grid.correct, (grid.correct + 1) % 4))
    keys = torch.cat([to_c.expand(len(sets), -1), to_d.expand(len(sets), -1)])
    return {
        "ncs": lambda: letter_probs_under(lm, single, sets, single.image_mask, HIDE),
        "cers": lambda: letter_probs_under(lm, grid_batch, torch.cat([sets, sets]), keys, 10.0),
    }


ALLOCATOR_RUN = """
import json, sys, time
import torch
import helpers.engine.loading
from bench.bench_figures import _calls
if sys.argv[1] == "default":
    helpers.engine.loading.keep_freed_memory = lambda: False
torch.set_num_threads(1)
calls = _calls(helpers.engine.loading.load_model("toy"))
out = {}
for name, call in calls.items():
    call()
    start = time.process_time()
    for _ in range(int(sys.argv[2])):
        call()
    out[name] = (time.process_time() - start) / int(sys.argv[2])
print(json.dumps(out))
"""


SIZING_RUN = """
import json, sys, time
import torch
import torch.fx.experimental._config
from bench.bench_figures import _sets
from helpers.engine import HIDE, build_batch, compile_decoder_layers, load_model, run_head_sets
from helpers.stimuli.corpora import load_corpus, single_image_items
torch.set_num_threads(1)
lm = load_model("toy")
compile_decoder_layers(lm)
torch.fx.experimental._config.use_duck_shape = sys.argv[1] == "duck"
batch = build_batch(lm.processor, single_image_items(load_corpus("co"), 1, 0, "matched"))
sets = torch.as_tensor(_sets(lm, 63))
call = lambda: run_head_sets(lm, batch.inputs, sets, batch.image_mask, HIDE, "all", 1)
call()
start = time.process_time()
for _ in range(int(sys.argv[2])):
    call()
print(json.dumps((time.process_time() - start) / int(sys.argv[2])))
"""


def sizing(repeats: int) -> dict:
    """Seconds of an NCS call of 64 sets (05's sets per forward) on a 47-token item, whose 43 rows after the shared
    prefix run in forwards of 2048 // 47 = 43 copies, under compiled layers with one symbol per dynamic size (kept)
    against dynamo's duck sizing (one symbol for sizes equal at tracing); fresh processes, alternated."""
    runs = {"kept": [], "duck": []}
    for _ in range(max(2, repeats // 2)):
        for setting, times in runs.items():
            command = [sys.executable, "-c", SIZING_RUN, setting, str(repeats)]
            times.append(json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout))
    kept, duck = statistics.median(runs["kept"]), statistics.median(runs["duck"])
    return {"seconds": {"kept": kept, "duck": duck}, "factor": duck / kept}


def _layer_attention_inputs(lm) -> dict:
    """Per call (NCS, CERS): what the first layer holding a head hands its compiled graph (attention.in_graph_inputs:
    mask, gate, addend, the continued rows' keys and values) and the layer's batch and rows, from one compiled call."""
    seen = {}
    original = attention.in_graph_inputs

    def recording(module, hidden_states, attention_mask):
        dense = original(module, hidden_states, attention_mask)
        if dense is not None and dense[1] is not None and "dense" not in seen:
            seen.update(dense=dense, batch=hidden_states.shape[0], rows=hidden_states.shape[1])
        return dense

    out = {}
    for kind, call in _calls(lm).items():
        seen.clear()
        with mock.patch.object(attention, "in_graph_inputs", recording):
            call()
        out[kind] = dict(seen)
    return out


def flex(lm, repeats: int) -> dict:
    """Seconds of one layer's attention as the compiled layers run it (attention.IN_GRAPH: two batched matmuls around
    a softmax over the materialised logits) against torch's flex_attention (blockwise, the logits never whole), each
    compiled on its own, at the first intervened layer of the NCS and the CERS call (_flex_against_in_graph); max
    |deviation| of the outputs. ``lm``: compiled layers (the inputs are theirs)."""
    shape = (lm.adapter.n_heads, lm.adapter.n_kv_heads, lm.adapter.head_dim)
    return {kind: _flex_against_in_graph(seen, *shape, repeats) for kind, seen in _layer_attention_inputs(lm).items()}


def _flex_against_in_graph(seen: dict, n_heads: int, n_kv: int, dim: int, repeats: int) -> dict:
    """The two attentions on one layer's real mask, gate, addend and continued keys and values (``seen``,
    _layer_attention_inputs), random queries and the layer's own keys and values. Flex takes the mask and the gated
    addend as its score_mod, and concatenates the continued keys inside its compiled function as the in-graph
    attention does."""
    from torch.nn.attention.flex_attention import flex_attention

    mask, gate, addend, first_key, first_value = seen["dense"]
    batch, rows, scaling = seen["batch"], seen["rows"], dim**-0.5
    generator = torch.Generator().manual_seed(0)
    query = torch.randn(batch, n_heads, rows, dim, generator=generator)  # [B, H, q, D]
    key, value = (torch.randn(batch, n_kv, rows, dim, generator=generator) for _ in range(2))  # [B, Hkv, q, D]
    gates = gate[:, :, 0, 0]  # [B, H]
    masks, addends = (_per_copy_or_shared(x[:, 0]) for x in (mask, addend))  # [B or 1, 1, q, k] -> (b, q, k) -> bias

    def score_mod(score, b, h, q, k):
        return score + masks(b, q, k) + torch.where(gates[b, h], addends(b, q, k), 0.0)

    def by_flex(query, key, value):
        if first_key is not None:
            key, value = attention._continued(first_key, first_value, key, value)
        output = flex_attention(query, key, value, score_mod=score_mod, scale=scaling, enable_gqa=True)
        return output.transpose(1, 2)  # [B, q, H, D], as the in-graph attention returns it

    def in_graph(query, key, value):
        dense = {attention.IN_GRAPH: (*seen["dense"], False)}  # rows whole, as a graph with symbolic rows runs them
        return attention.head_probe_attention(None, query, key, value, None, scaling=scaling, **dense)[0]

    runs = {"in_graph": torch.compile(in_graph, dynamic=True), "flex": torch.compile(by_flex)}
    outputs = {name: run(query, key, value) for name, run in runs.items()}  # compiles both
    t = _interleaved({name: functools.partial(run, query, key, value) for name, run in runs.items()}, repeats)
    return {
        "shape": {"batch": batch, "heads": n_heads, "rows": rows, "keys": mask.shape[-1], "dim": dim},
        "seconds": t,
        "factor": t["flex"] / t["in_graph"],
        "max_abs_deviation": float((outputs["flex"] - outputs["in_graph"]).abs().max()),
    }


def _per_copy_or_shared(values: torch.Tensor):
    """(b, q, k) -> values[b, q, k] for per-copy values [B, q, k], values[q, k] for shared ones [1, q, k] (flex's
    score_mod; its CPU template fails to compile a constant batch index)."""
    if values.shape[0] > 1:
        return lambda b, q, k: values[b, q, k]
    shared = values[0]
    return lambda b, q, k: shared[q, k]


def kernels(lm, repeats: int) -> dict:
    """Seconds of an NCS and a CERS call under each kernel choice against its alternative, and max |dP|."""
    calls = _calls(lm)
    out = {}

    def compare(name: str, kept: dict, other: dict, deviation: float | None = None) -> None:
        out[name] = {
            kind: {"seconds": {"kept": kept[kind], "other": other[kind]}, "factor": other[kind] / kept[kind]}
            for kind in calls
        }
        if deviation is not None:
            out[name]["max_abs_deviation"] = deviation

    runs = {"kept": [], "default": []}
    for _ in range(max(2, repeats // 2)):  # separate processes: glibc's defaults cannot be restored in one
        for setting, times in runs.items():
            command = [sys.executable, "-c", ALLOCATOR_RUN, setting, str(repeats)]
            times.append(json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout))
    median = {s: {k: statistics.median(t[k] for t in runs[s]) for k in calls} for s in runs}
    compare("allocator keeps freed memory", median["kept"], median["default"])

    def with_small(keys: int, call):
        def run():
            attention.SMALL_KEYS, saved = keys, attention.SMALL_KEYS
            try:
                return call()
            finally:
                attention.SMALL_KEYS = saved

        return run

    small = {kind: with_small(attention.SMALL_KEYS, call) for kind, call in calls.items()}
    sdpa = {kind: with_small(0, call) for kind, call in calls.items()}
    t = _interleaved(
        {**{("small", k): c for k, c in small.items()}, **{("sdpa", k): c for k, c in sdpa.items()}}, repeats
    )
    deviation = max(float((small[k]() - sdpa[k]()).abs().max()) for k in calls)
    compare(
        "attention as matmuls (<= SMALL_KEYS keys)",
        *({k: t[(s, k)] for k in calls} for s in ("small", "sdpa")),
        deviation,
    )

    compiled_lm = load_model("toy")
    compile_decoder_layers(compiled_lm)
    compiled = _calls(compiled_lm)
    for call in compiled.values():
        call()  # compiles
    t = _interleaved(
        {**{("compiled", k): c for k, c in compiled.items()}, **{("eager", k): c for k, c in calls.items()}}, repeats
    )
    deviation = max(float((compiled[k]() - calls[k]()).abs().max()) for k in calls)
    compare(
        "torch.compile'd decoder layers", *({k: t[(s, k)] for k in calls} for s in ("compiled", "eager")), deviation
    )

    symbolic_lm = load_model("toy")  # its layers never take a static graph
    compile_decoder_layers(symbolic_lm)
    symbolic = {kind: _without_static_shapes(call) for kind, call in _calls(symbolic_lm).items()}
    for call in symbolic.values():
        call()  # compiles
    t = _interleaved(
        {**{("static", k): c for k, c in compiled.items()}, **{("symbolic", k): c for k, c in symbolic.items()}},
        repeats,
    )
    deviation = max(float((compiled[k]() - symbolic[k]()).abs().max()) for k in calls)
    compare(
        "compiled layers: static rows and keys, causal rows in blocks",
        *({k: t[(s, k)] for k in calls} for s in ("static", "symbolic")),
        deviation,
    )
    return out


def _without_static_shapes(call):
    """``call`` with every compiled layer's shapes symbolic and its rows whole (no static graph)."""

    def run():
        with mock.patch.object(compiled_layers, "STATIC_SHAPES", 0):
            return call()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workers", type=int, default=len(__import__("os").sched_getaffinity(0)))
    args = parser.parse_args()
    torch.set_num_threads(1)
    copy_ledger.install_counter()  # as in a run: the cached steering run keeps its copies' digests
    lm = load_model("toy")
    result = {"kernels": kernels(lm, args.repeats), "sizing": sizing(args.repeats)}
    compile_decoder_layers(lm)  # as notebooks 03-05 run by default
    result["flex"] = flex(lm, 4 * args.repeats)
    result |= {"cuts": cuts(lm, args.repeats), "prefix_rows": prefix_rows(lm, args.repeats), "floor": matmul_floor(lm)}
    result["call_parts"] = call_parts(lm, result["floor"], 4 * args.repeats)
    result["workers"] = worker_speedup(lm, args.workers, max(2, args.repeats // 2))
    per_copy = {k: result["cuts"][k]["item_seconds_after"] / result["cuts"][k]["copies"] for k in ("cers", "ncs")}
    result["projection"] = projection(per_copy, args.workers, result["workers"]["speedup"])
    result["bf16"] = bf16(lm, args.repeats)
    result["graded"] = graded_cost(args.repeats)
    paths.BENCH_OUT.mkdir(parents=True, exist_ok=True)
    out = paths.BENCH_OUT / "figures.json"
    out.write_text(json.dumps(result, indent=2))
    _print(result)
    print(f"wrote {out}")


def _print(result: dict) -> None:
    for name, k in result["kernels"].items():
        deviation = f", max |dP| {k['max_abs_deviation']:.1e}" if "max_abs_deviation" in k else ""
        print(
            f"{name}: NCS call {1e3 * k['ncs']['seconds']['kept']:.0f} ms vs "
            f"{1e3 * k['ncs']['seconds']['other']:.0f} ms "
            f"= {k['ncs']['factor']:.2f}x, CERS call {1e3 * k['cers']['seconds']['kept']:.0f} ms vs "
            f"{1e3 * k['cers']['seconds']['other']:.0f} ms = {k['cers']['factor']:.2f}x{deviation}"
        )
    z = result["sizing"]
    print(
        f"compiled layers, one symbol per size vs duck sizing (NCS call, 64 sets, batch = rows = 43): "
        f"{1e3 * z['seconds']['kept']:.0f} ms vs {1e3 * z['seconds']['duck']:.0f} ms = {z['factor']:.2f}x"
    )
    for kind, f in result["flex"].items():
        shape = " x ".join(f"{v} {k}" for k, v in f["shape"].items())
        print(
            f"{kind} call's attention at its first intervened layer ({shape}): in-graph matmuls "
            f"{1e3 * f['seconds']['in_graph']:.1f} ms vs flex_attention {1e3 * f['seconds']['flex']:.1f} ms = "
            f"{f['factor']:.2f}x, max |deviation| {f['max_abs_deviation']:.1e}"
        )
    for kind in ("cers", "ncs"):
        c = result["cuts"][kind]
        print(
            f"{kind} item ({c['copies']} copies): {1e3 * c['item_seconds_before']:.0f} ms -> "
            f"{1e3 * c['item_seconds_after']:.0f} ms = {c['factor']:.2f}x"
        )
        for name, factor in c["factors"].items():
            print(f"    {name:<40}{factor:>6.2f}x")
    for rows, r in result["prefix_rows"].items():
        print(
            f"ncs call at the {rows} rows: unchanged prefix once {1e3 * r['seconds']['prefix']:.0f} ms vs whole "
            f"copies {1e3 * r['seconds']['whole']:.0f} ms = {r['factor']:.2f}x, max |dP| {r['max_abs_deviation']:.1e}"
        )
    floor = result["floor"]
    print(
        f"per copy {1e3 * result['cuts']['ncs']['per_copy_seconds']:.2f} ms vs matmul-peak floor "
        f"{1e3 * floor['floor_seconds_per_copy']:.2f} ms ({floor['peak_flops'] / 1e9:.0f} GFLOP/s); fixed cost "
        f"per call {1e3 * result['cuts']['fixed_seconds_per_call']:.1f} ms"
    )
    print("an NCS call's parts, per copy against their matmuls' floor, and fixed per call, on each path:")
    for path, parts in result["call_parts"].items():
        print(f"  {path}:")
        for part, c in parts.items():
            ratio = c["per_copy_seconds"] / c["floor_seconds_per_copy"] if c["floor_seconds_per_copy"] else None
            print(
                f"    {part:<36}{1e3 * c['per_copy_seconds']:>6.2f} ms vs {1e3 * c['floor_seconds_per_copy']:.2f} ms"
                f"{'' if ratio is None else f' = {ratio:.2f}x'}, fixed {1e3 * c['fixed_seconds']:.1f} ms"
            )
    w = result["workers"]
    print(
        f"workers: 1 vs {w['workers']}: {w['wall_speedup']:.2f}x wall-clock here, {w['speedup']:.2f}x on idle cores "
        f"({w['workers']} x CPU(1) / CPU({w['workers']}))"
    )
    p = result["projection"]
    for notebook in ("03_cers", "04_ncs", "05_controls"):
        print(f"    {notebook:<14}{p[notebook]['copies']:>9,} copies {p[notebook]['seconds'] / 60:>6.1f} min")
    print(f"projected 03-05 at {p['workers']} workers: {p['total_minutes']:.1f} min")
    b = result["bf16"]
    print(
        f"bf16 vs fp32 (NCS call): {b['speedup']:.2f}x, max |P_bf16 - P_fp32| {b['max_abs_deviation']:.3f} "
        f"over {b['items']} items x 21 sets"
    )
    g = result["graded"]
    tokens = g["image_tokens"]
    print(f"default (graded) toy against toy-modular (image tokens {tokens['graded']} vs {tokens['modular']}):")
    for kind, factor in g["factor"].items():
        modular, graded = g["seconds"]["modular"][kind], g["seconds"]["graded"][kind]
        print(f"    {kind:<14}{1e3 * graded:>7.0f} ms vs {1e3 * modular:>5.0f} ms = {factor:.2f}x the time")


if __name__ == "__main__":
    main()
