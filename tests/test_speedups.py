"""The speed-ups give the results of the plain path: each exact cut, forked workers, shards and claims."""

import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from helpers.engine import HIDE, build_batch, head_sets, run_head_sets
from helpers.engine.inputs import item_batch
from helpers.engine.mcq import letter_probs
from helpers.measures import necessity, steering
from helpers.stimuli.corpora import grid_items, items_of, load_corpus, single_image_items
from helpers.storage import workers
from helpers.storage.cache import ResultCache

SEED = 3


def _same_item(a, b) -> bool:
    return (a.prompt, a.boxes, a.correct, a.seed_key) == (b.prompt, b.boxes, b.correct, b.seed_key) and (
        a.image.tobytes() == b.image.tobytes()
    )


def test_memoised_items_and_batches_equal_fresh_ones(lm):
    fresh = grid_items(load_corpus("co"), 5, SEED)
    memo = items_of("grid", "co", 5, SEED)
    assert all(_same_item(a, b) for a, b in zip(fresh, memo))
    assert items_of("grid", "co", 5, SEED) is memo  # rendered once
    text = items_of("text", "co", 3, SEED)
    assert all(_same_item(a, b) for a, b in zip(single_image_items(load_corpus("co"), 3, SEED, "text"), text))
    batch = item_batch(lm.processor, memo[2])
    assert item_batch(lm.processor, memo[2]) is batch
    plain = build_batch(lm.processor, [fresh[2]])
    assert plain.inputs.keys() == batch.inputs.keys()
    assert all(torch.equal(plain.inputs[k], batch.inputs[k]) for k in plain.inputs)
    assert torch.equal(plain.image_mask, batch.image_mask)
    assert torch.equal(plain.last_prompt_mask, batch.last_prompt_mask)


def test_the_output_head_at_the_answer_row_only_gives_the_same_logits(lm, sets):
    item = grid_items(load_corpus("co"), 1, SEED)[0]
    batch = build_batch(lm.processor, [item])
    heads = torch.as_tensor(sets)
    for rows in ("all", batch.last_prompt_mask):
        full = run_head_sets(lm, batch.inputs, heads, batch.image_mask, HIDE, rows)[:, -1]  # [3, V]
        last = run_head_sets(lm, batch.inputs, heads, batch.image_mask, HIDE, rows, logits_to_keep=1)
        assert last.shape == (3, 1, full.shape[-1])
        assert (last[:, -1] - full).abs().max() < 1e-5  # logits; the letter probabilities agree to 1e-6


def test_clean_probabilities_once_per_item_equal_the_per_run_ones(lm, sets, tmp_path):
    cache = ResultCache(tmp_path)
    run = steering.steering_run(lm, "co", 3, SEED, sets, 10.0, "all", cache, chunk=2)
    items = grid_items(load_corpus("co"), 3, SEED)
    per_call = steering.steer_items(lm, items, steering.distractor_cells(items, SEED), sets, 10.0)
    assert set(run) == set(per_call)
    for key in per_call:
        np.testing.assert_allclose(run[key], per_call[key], atol=1e-6, rtol=0)
    masked = necessity.necessity_run(lm, "co", 3, SEED, sets, "last", cache, chunk=2)
    again = steering.steering_run(lm, "co", 3, SEED, sets[:1], 3.0, "all", cache, chunk=2)
    np.testing.assert_array_equal(again["p_clean"], run["p_clean"])  # another run reads the same clean entries
    for arm in necessity.ARMS:
        arm_items = single_image_items(load_corpus("co"), 3, SEED, arm)
        plain = [letter_probs(lm.model, lm.processor, build_batch(lm.processor, [i]))[0] for i in arm_items]
        np.testing.assert_array_equal(masked[f"{arm}_p_clean"], torch.stack(plain).numpy())


def test_two_workers_give_the_arrays_of_one(lm, sets, tmp_path, monkeypatch):
    runs = {}
    for n in (1, 2):
        monkeypatch.setenv(workers.WORKERS_ENV, str(n))
        cache = ResultCache(tmp_path / str(n))
        runs[n] = necessity.necessity_run(lm, "co", 4, SEED, sets, "all", cache, chunk=1)
        assert not list((tmp_path / str(n)).rglob("*.claim"))  # every claim released
    assert runs[1].keys() == runs[2].keys()
    for key in runs[1]:
        assert runs[1][key].dtype == runs[2][key].dtype and np.array_equal(runs[1][key], runs[2][key]), key


def test_prepare_runs_for_the_missing_chunks_before_any_is_computed(tmp_path):
    calls = []

    def prepare(start, stop):
        calls.append(("prepare", start))

    def compute(start, stop):
        calls.append(("compute", start))
        return _compute(start, stop)

    cache = ResultCache(tmp_path)
    cache.cached_chunks("c", {}, 4, 2, lambda a, b: _compute(a, b))  # chunk 0 and 1 on disk
    out = cache.cached_chunks("c", {}, 8, 2, compute, prepare)
    assert out["v"].tolist() == [0, 2, 4, 6, 8, 10, 12, 14]
    assert calls == [("prepare", 4), ("prepare", 6), ("compute", 4), ("compute", 6)]
    calls.clear()
    cache.cached_chunks("c", {}, 8, 2, compute, prepare)
    assert calls == []


@torch.no_grad()
def test_remembered_items_reach_forked_workers_and_change_no_result(lm, sets, tmp_path, monkeypatch):
    """necessity_run records every item's clean keys and values in the parent before the workers fork; the runs
    with and without those records (whole copies) give the same probabilities."""
    head_sets._CLEAN.stores.clear()
    monkeypatch.setenv(workers.WORKERS_ENV, "2")
    run = necessity.necessity_run(lm, "co", 4, SEED, sets, "all", ResultCache(tmp_path / "a"), chunk=1)
    for arm in necessity.ARMS:
        for item in items_of(necessity.ARM_KINDS[arm], "co", 4, SEED):
            inputs = item_batch(lm.processor, item).inputs
            assert head_sets._CLEAN.holds(lm.model, list(inputs.values()))
    monkeypatch.setattr(type(lm.adapter), "continues_from_cache", False)  # whole copies, no record
    whole = necessity.necessity_run(lm, "co", 4, SEED, sets, "all", ResultCache(tmp_path / "b"), chunk=1)
    for key in run:
        np.testing.assert_allclose(run[key], whole[key], atol=1e-6, rtol=0, err_msg=key)


def test_the_memo_keeps_results_for_the_same_unchanged_tensors(lm, monkeypatch):
    memo, calls = head_sets._Memo(), []
    pixels = torch.ones(3)

    def compute():
        calls.append(1)
        return torch.zeros(2**10)  # 4 KiB

    with torch.no_grad():
        first = memo.get_or_compute(lm.model, [pixels, "text"], compute)
        assert memo.get_or_compute(lm.model, [pixels], compute) is first and len(calls) == 1
        assert memo.holds(lm.model, [pixels]) and not memo.holds(lm.model, [pixels.clone()])
        memo.get_or_compute(lm.model, [pixels.clone()], compute)  # equal values, another tensor
        assert len(calls) == 2
        pixels.add_(1)  # changed in place
        assert not memo.holds(lm.model, [pixels])
        memo.get_or_compute(lm.model, [pixels], compute)
        assert len(calls) == 3
        weight = next(lm.model.parameters())
        weight.mul_(1.0)  # a parameter written: every kept result is stale
        assert not memo.holds(lm.model, [pixels])
        monkeypatch.setattr(head_sets, "MEMO_BYTES", 2 * 4096)
        kept = [torch.ones(1) for _ in range(3)]
        for tensor in kept:
            memo.get_or_compute(lm.model, [tensor], compute)
        assert [memo.holds(lm.model, [t]) for t in kept] == [False, True, True]  # the oldest went first
    memo.get_or_compute(lm.model, [kept[2]], compute)  # with gradients on: computed, never kept
    assert len(calls) == 7


def test_inputs_reach_the_device_once_per_tensor(lm):
    """on_device hands the same device copy to every call on the same input tensor (so the memos that know an
    item by its tensors recognise it on a GPU), a new copy once the tensor changed, and CPU tensors as they are."""
    pixels, ids = torch.ones(2, 3), torch.arange(4)[None]
    with torch.no_grad():
        assert head_sets.on_device(lm, {"pixel_values": pixels})["pixel_values"] is pixels  # the toy is on the CPU
        meta = torch.device("meta")
        first = head_sets._moved(lm.model, pixels, meta)
        assert first.device == meta and head_sets._moved(lm.model, pixels, meta) is first
        assert head_sets._moved(lm.model, ids, meta) is not first
        pixels.add_(1)
        assert head_sets._moved(lm.model, pixels, meta) is not first
        assert head_sets._moved(lm.model, "text", meta) == "text"


def _compute(start, stop):
    return {"v": np.arange(start, stop) * 2.0}


def test_claims_of_live_owners_are_waited_for_and_dead_ones_taken_over(tmp_path, monkeypatch):
    cache = ResultCache(tmp_path)
    params = {"x": 1}
    entry = cache.path("c", {**params, "chunk": [0, 2]})
    entry.parent.mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    claim = entry.with_name(entry.name + ".claim")
    claim.write_text(json.dumps({"host": socket.gethostname(), "pid": dead.pid}))
    assert cache.cached_chunks("c", params, 4, 2, _compute)["v"].tolist() == [0, 2, 4, 6]
    assert not claim.exists()

    other = cache.path("c", {**params, "chunk": [0, 3]})
    claim = other.with_name(other.name + ".claim")
    claim.write_text(json.dumps({"host": "another-host", "pid": 1}))
    workers.take_free([(other, lambda: cache.save("c", {**params, "chunk": [0, 3]}, _compute(0, 3)))])
    assert not other.exists()  # a recent claim of another host is left alone
    old = time.time() - workers.STALE_AFTER - 60
    os.utime(claim, (old, old))
    assert cache.cached_chunks("c", params, 3, 3, _compute)["v"].tolist() == [0, 2, 4]


def test_a_shard_takes_its_share_first(monkeypatch):
    monkeypatch.setenv(workers.SHARD_ENV, "1/3")
    assert workers.shard_order(7) == [1, 4, 0, 2, 3, 5, 6]
    monkeypatch.setenv(workers.SHARD_ENV, "3/3")
    with pytest.raises(ValueError, match="i/n"):
        workers.shard()
    monkeypatch.setenv(workers.WORKERS_ENV, "0")
    with pytest.raises(ValueError, match="whole number"):
        workers.worker_count()


@pytest.mark.notebooks
def test_workers_fork_inside_a_notebook_kernel(tmp_path, monkeypatch):
    """The runner's kernels fork their workers after the model is loaded: a chunked run in a papermill kernel
    at 2 workers finishes and gives the arrays of 1 worker."""
    from helpers import run

    header = (
        "# ---\n# jupyter:\n#   kernelspec:\n#     display_name: Python 3\n#     language: python\n"
        "#     name: python3\n# ---\n\n"
    )
    body = (
        '# %% tags=["parameters"]\nfolder = ""\n\n# %%\nimport numpy as np\nimport torch\n'
        "from helpers.storage.cache import ResultCache\n"
        "torch.ones(64, 64) @ torch.ones(64, 64)  # the kernel has run torch before it forks\n"
        "out = ResultCache(folder).cached_chunks('w', {}, 6, 1, lambda a, b: {'v': np.arange(a, b) * np.pi})\n"
        "np.save(folder + '/out.npy', out['v'])\n"
    )
    source = tmp_path / "98_workers.py"
    source.write_text(header + body)
    results = {}
    for n in (1, 2):
        monkeypatch.setenv(workers.WORKERS_ENV, str(n))
        folder = tmp_path / f"cache{n}"
        folder.mkdir()
        run.run([source], {"folder": str(folder)}, tmp_path / f"build{n}")
        results[n] = np.load(folder / "out.npy")
        assert len(list((folder / "w").glob("*.npz"))) == 6 and not list(folder.rglob("*.claim"))
    np.testing.assert_array_equal(results[1], results[2])
