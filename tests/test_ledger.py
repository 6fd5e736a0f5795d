"""The copy ledger: each copy's digest, the lines a cached computation writes, the run's sums and duplicates."""

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers.engine import HIDE, build_batch, run_head_sets
from helpers.engine.copy_ledger import copy_digests, layer_flops
from helpers.measures import necessity, steering
from helpers.runner import ledger as run_ledger
from helpers.runner import progress
from helpers.stimuli.corpora import load_corpus, single_image_items
from helpers.storage import ledger, workers
from helpers.storage.cache import ResultCache

SEED = 3


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """The ledger folder this test's process writes into, as notebook "nb"."""
    monkeypatch.setenv(ledger.LEDGER_ENV, str(tmp_path / "ledger"))
    monkeypatch.setenv(ledger.NOTEBOOK_ENV, "nb")
    return tmp_path / "ledger"


def _spec(heads, keys, rows="all", bias=HIDE, masking="hide"):
    from helpers.engine.attention import Intervention

    n = heads.shape[0]
    return Intervention(
        heads=heads,
        keys=keys.expand(n, -1),
        bias=torch.as_tensor(bias, dtype=torch.float32),
        query_rows=rows if isinstance(rows, str) else rows.expand(n, -1),
        masking=masking,
        factor=torch.tensor(0.0),
    )


def test_a_copy_is_known_by_its_item_head_set_keys_rows_and_masking(lm, sets):
    items = single_image_items(load_corpus("co"), 2, SEED, "matched")
    batch, other = (build_batch(lm.processor, [item]) for item in items)
    heads = torch.as_tensor(sets)
    keys = batch.image_mask
    digests = copy_digests(lm, batch.inputs, _spec(heads, keys), 1)
    assert digests.dtype == np.uint64 and len(set(digests.tolist())) == 3
    assert copy_digests(lm, batch.inputs, _spec(heads[1:2], keys), 1)[0] == digests[1]  # alone or among others
    changed = [
        copy_digests(lm, other.inputs, _spec(heads, other.image_mask), 1),  # another item
        copy_digests(lm, batch.inputs, _spec(heads, ~keys), 1),  # other keys
        copy_digests(lm, batch.inputs, _spec(heads, keys, batch.last_prompt_mask), 1),  # other rows
        copy_digests(lm, batch.inputs, _spec(heads, keys, bias=10.0), 1),  # another bias
        copy_digests(lm, batch.inputs, _spec(heads, keys, masking="rescale"), 1),  # another masking
        copy_digests(lm, batch.inputs, _spec(heads, keys), 0),  # other logits kept
    ]
    for other_digests in changed:
        assert not set(other_digests.tolist()) & set(digests.tolist())


def test_a_read_counts_one_copy_per_batch_row_known_by_its_image(lm, folder):
    from dataclasses import replace

    from helpers.engine import image_mass

    item = single_image_items(load_corpus("co"), 2, SEED, "matched")
    same_prompt = replace(item[0], image=item[1].image)  # another image behind the same words
    batch = build_batch(lm.processor, [item[0], same_prompt])
    image_mass(lm, batch, row_group="last")
    image_mass(lm, batch, row_group="last")  # the same read again, outside any cache
    image_mass(lm, batch, row_group="all")  # another read of the same items
    run = run_ledger.collect(folder)
    record = run["notebooks"]["nb"]
    assert record["computed"] == 3 * 2 and record["calls"] == 3 and run["duplicates"] == 2
    lines = sorted((json.loads(t) for p in folder.glob("nb.*.jsonl") for t in p.read_text().splitlines()), key=str)
    digests = [set(np.frombuffer(bytes.fromhex(line["digests"]), dtype="<u8").tolist()) for line in lines]
    assert all(len(d) == 2 for d in digests) and len(set.union(*digests)) == 4
    text = lm.model.config.text_config
    T, D, V = batch.inputs["input_ids"].shape[1], text.hidden_size, lm.model.get_output_embeddings().weight.shape[0]
    shape = {"layers": text.num_hidden_layers, "hidden": D, "vocab": V, "mlp": text.intermediate_size}
    shape |= {"q": text.num_attention_heads * text.head_dim, "kv": text.num_key_value_heads * text.head_dim}
    per_item = shape["layers"] * layer_flops(shape, T, T) + 2 * D * V * T
    assert {line["flops"] for line in lines} == {2 * per_item}


def test_a_decoder_layer_counts_its_matmuls():
    shape = {"layers": 2, "hidden": 4, "q": 8, "kv": 2, "mlp": 6, "vocab": 10}
    # rows 3, keys 5: q, k, v 2*3*4*(8+4) = 288; output 2*3*8*4 = 192; scores and values 2*2*3*5*8 = 480;
    # MLP 2*3*3*4*6 = 432
    assert layer_flops(shape, 3, 5) == 288 + 192 + 480 + 432


def test_a_cached_computation_writes_its_copies_and_reads_them_back(lm, sets, tmp_path, folder):
    cache = ResultCache(tmp_path / "cache")
    necessity.necessity_run(lm, "co", 3, SEED, sets, "all", cache, chunk=2)
    necessity.necessity_run(lm, "co", 3, SEED, sets, "all", cache, chunk=2)  # read back
    lines = [json.loads(t) for p in folder.glob("nb.*.jsonl") for t in p.read_text().splitlines()]
    computed = [line for line in lines if line["computation"].startswith("necessity") and not line.get("read")]
    assert len(computed) == 2 and {line["calls"] for line in computed} == {2, 4}  # chunks of 2 and 1 items, 2 arms
    run = run_ledger.collect(folder)
    record = run["notebooks"]["nb"]["computations"]
    masked = record.pop("necessity arms=matched+mismatched keys=image masking=hide row_group=all")
    assert masked["computed"] == masked["read_back"] == 3 * 2 * 3  # items x arms x sets
    assert masked["calls"] == 6 and masked["flops"] > 0 and masked["copy_seconds"] > 0
    assert masked["seconds"] >= masked["copy_seconds"]
    assert all(c["computed"] == 0 and c["seconds"] > 0 for c in record.values())  # the clean runs: no copies
    assert run["duplicates"] == 0


def test_a_copy_computed_again_elsewhere_is_a_duplicate(lm, sets, tmp_path, folder):
    steering.steering_run(lm, "co", 2, SEED, sets, 10.0, "all", ResultCache(tmp_path / "cache"), chunk=2)
    other = ResultCache(tmp_path / "other")  # a cache without them
    steering.steering_run(lm, "co", 2, SEED, sets[1:], 10.0, "all", other, chunk=2)  # sets 1, 2 again
    items = single_image_items(load_corpus("co"), 1, SEED, "matched")
    batch = build_batch(lm.processor, items)
    for _ in range(2):  # the same copies outside the cache, twice
        run_head_sets(lm, batch.inputs, torch.as_tensor(sets[:1]), batch.image_mask, HIDE, "all", 1)
    run = run_ledger.collect(folder)
    assert run["computed"] == 2 * 2 * 3 + 2 * 2 * 2 + 2
    assert run["duplicates"] == 2 * 2 * 2 + 1
    where = {(d["first"], d["again"]): d["copies"] for d in run["duplicated"]}
    uncached = "nb: uncached test_ledger.test_a_copy_computed_again_elsewhere_is_a_duplicate"
    steered = "nb: steering beta=10.0 row_group=all"
    assert where == {(steered, steered): 8, (uncached, uncached): 1}


def test_the_floor_is_the_ledgers_flops_at_the_peak_over_the_cores():
    from helpers.runner.floor import floor

    notebooks = {
        "03_cers": {"computed": 1000, "read_back": 10, "calls": 50, "flops": 4e12, "copy_seconds": 30.0},
        "04_ncs": {"computed": 0, "read_back": 5, "calls": 0, "flops": 0.0, "copy_seconds": 0.0},
    }
    run = {"ledger": {"notebooks": notebooks, "duplicates": 0}, "seconds_per_notebook": {"03_cers": 26.0}}
    result = floor({**run, "wall_seconds": 26.0}, peak=1e11, cores=2)
    assert result["floor_seconds"] == 20.0 and result["wall_over_floor"] == 1.3  # 4e12 / 1e11 / 2
    assert (result["computed"], result["read_back"], result["flops"]) == (1000, 15, 4e12)
    cers = result["notebooks"]["03_cers"]
    assert cers["floor_seconds_per_copy"] == 0.04 and cers["seconds_per_copy"] == 0.03  # 4e9 FLOP at 1e11 on a core
    assert cers["per_copy_over_floor"] == 0.75 and cers["wall_seconds"] == 26.0
    assert result["notebooks"]["04_ncs"]["per_copy_over_floor"] is None


def test_the_wait_counts_the_copies_done_and_the_time_left(tmp_path, monkeypatch):
    monkeypatch.setenv(ledger.LEDGER_ENV, str(tmp_path))
    monkeypatch.setenv(ledger.NOTEBOOK_ENV, "04_ncs")
    done = progress.CopiesDone(tmp_path, "04_ncs")
    assert done.count() == 0
    ledger.chunk_read("necessity", tmp_path / "a.npz", np.arange(30, dtype=np.uint64))
    with ledger.computing("necessity") as tally:
        ledger.record_copies(np.arange(12, dtype=np.uint64), 1e9, 0.5)
    ledger.chunk_computed(tally, tmp_path / "b.npz")
    assert done.count() == 42
    (tmp_path / "04_ncs.1.jsonl").write_text('{"digests": "')  # a line still being written: not counted yet
    assert done.count() == 42
    # 58 copies left at 6 s each over 2 workers: 2.9 min; without a bench, at 21 s x 2 workers / 42 copies = 1 s each
    shown = progress.line("04_ncs", 42, 100, 30.0, 6.0, 2)
    assert shown == "      04_ncs: 42 of about 100 copies (42%), about 3 min left (at 6000.0 ms a copy in make bench)"
    assert progress.line("04_ncs", 42, 100, 21.0, None, 2).endswith("about 0 min left (at 1000.0 ms a copy so far)")


@pytest.mark.notebooks
def test_no_copy_is_computed_twice_in_a_smoke_run(smoke_run):
    """The smoke run's ledger (run.json): every notebook that runs copies counts them, and no (model, item, head-set,
    masking, row group, keys) copy is computed in two places, across notebooks included."""
    run = json.loads((smoke_run["folder"] / "notebooks" / "run.json").read_text())["ledger"]
    for notebook in ("03_cers", "04_ncs", "05_controls", "06_cross_model", "08_methods"):
        record = run["notebooks"][notebook]
        assert record["computed"] + record["read_back"] > 0, notebook
        assert record["computed"] == 0 or record["flops"] > 0 and record["calls"] > 0, notebook
    assert run["duplicates"] == 0, run["duplicated"]


def test_forked_workers_write_their_own_lines(lm, sets, tmp_path, folder, monkeypatch):
    monkeypatch.setenv(workers.WORKERS_ENV, "2")
    necessity.necessity_run(lm, "co", 4, SEED, sets, "all", ResultCache(tmp_path / "cache"), chunk=1)
    run = run_ledger.collect(folder)
    assert run["computed"] == 4 * 2 * 3 and run["duplicates"] == 0  # items x arms x sets, each chunk once
    masked = [p for p in folder.glob("nb.*.jsonl") if "necessity" in p.read_text()]
    assert len(masked) == 2  # the kernel's process and its forked worker each computed chunks


def test_no_chunk_is_computed_by_two_workers(tmp_path, folder, monkeypatch):
    """A claim found empty (its writer still filling it) is waited for, not taken over: no chunk computed twice,
    even when chunks take no time and two processes meet at every claim."""
    monkeypatch.setenv(workers.WORKERS_ENV, "2")
    for run in range(10):
        ResultCache(tmp_path / "cache").cached_chunks("x", {"run": run}, 40, 1, lambda a, b: {"v": np.arange(a, b)})
    lines = [json.loads(t) for p in folder.glob("nb.*.jsonl") for t in p.read_text().splitlines()]
    computed = [line["entry"] for line in lines if not line.get("read")]
    assert len(computed) == len(set(computed)) == 10 * 40
    empty = tmp_path / "filling.claim"
    empty.touch()
    assert not workers._is_stale(empty)  # being filled
    os.utime(empty, (time.time() - 2 * workers.FILLING_SECONDS,) * 2)
    assert workers._is_stale(empty)  # its writer died before filling it


def test_every_computation_is_a_place_and_earlier_runs_entries_one(folder):
    """Duplicates: a chunk computed twice counts twice; a read of an entry this run computed is no copy computed
    again; earlier runs' entries, however often read, are one place, and their copies computed here too are
    duplicates."""
    copies = np.arange(5, dtype=np.uint64)
    for _ in range(2):
        with ledger.computing("necessity") as tally:
            ledger.record_copies(copies, 1.0, 0.1)
        ledger.chunk_computed(tally, Path("here.npz"))
    ledger.chunk_read("necessity", Path("here.npz"), copies)
    run = run_ledger.collect(folder)
    assert (run["computed"], run["read_back"], run["duplicates"]) == (10, 5, 5)
    for _ in range(2):
        ledger.chunk_read("steering", Path("earlier.npz"), np.arange(3, 8, dtype=np.uint64))  # copies 3, 4 again
    ledger.chunk_read("steering", Path("other.npz"), np.arange(6, 9, dtype=np.uint64))  # 6, 7 in earlier.npz too
    run = run_ledger.collect(folder)
    assert (run["computed"], run["read_back"], run["duplicates"]) == (10, 18, 5 + 2)


def test_a_last_chunk_meets_another_runs_chunk_of_the_same_start(lm, tmp_path, monkeypatch):
    """Discovery's chunks hold one copy per strip: a 6-strip run after an 8-strip one (chunks of 4) cuts its last
    chunk from the larger run's [4, 8) and computes nothing; an 8-strip run after a 6-strip one computes only strips
    6 and 7 of [4, 8). Either way no copy is computed twice and the scores are those of a run of its own."""
    from helpers.measures.discovery import discover

    alone = {n: discover(lm, "co", "ref", n, SEED, ResultCache(tmp_path / f"alone{n}"), 4) for n in (6, 8)}
    for first, then in ((8, 6), (6, 8)):
        folder = tmp_path / f"ledger{first}-{then}"
        monkeypatch.setenv(ledger.LEDGER_ENV, str(folder))
        cache = ResultCache(tmp_path / f"{first}-{then}")
        discover(lm, "co", "ref", first, SEED, cache, 4)
        out = discover(lm, "co", "ref", then, SEED, cache, 4)
        run = run_ledger.collect(folder)
        assert (run["computed"], run["read_back"], run["duplicates"]) == (8, min(first, then), 0)
        for key, value in alone[then].items():
            np.testing.assert_allclose(out[key], value, rtol=0, atol=1e-6, err_msg=key)


def test_one_copy_per_item_is_checked_when_a_chunk_is_saved(tmp_path):
    def two_per_item(start, stop):
        ledger.record_copies(np.arange(2 * (stop - start), dtype=np.uint64), 1.0, 0.1)
        return {"v": np.arange(start, stop)}

    with pytest.raises(RuntimeError, match=r"items \[0, 2\) made 4 copies"):
        ResultCache(tmp_path).cached_chunks("c", {}, 2, 2, two_per_item, one_copy_per_item=True)


def test_the_runners_plan_stands_beside_the_counted_copies(tmp_path):
    """A notebook's planned copies (written by the runner as it starts it) are in the ledger and its summary line."""
    run_ledger.write_planned(tmp_path, "03_cers", 122_400)
    record = run_ledger.collect(tmp_path)["notebooks"]["03_cers"]
    assert record["planned"] == 122_400 and record["computed"] == 0
    assert "(planned 122,400)" in run_ledger.summary_lines(run_ledger.collect(tmp_path), {})[0]


def test_the_runners_plan_is_within_a_tenth_of_the_published_runs_copies():
    """Each notebook's planned copies (helpers/runner/steps.py, at its declared defaults) against the copies the
    published default run asked for, computed or read back (paper_figures/notebooks/run.json's ledger)."""
    from helpers.runner.params import declared_parameters
    from helpers.runner.steps import STEPS
    from helpers.storage import paths

    published = json.loads((paths.PAPER_FIGURES / "notebooks" / "run.json").read_text())["ledger"]["notebooks"]
    for notebook in ("03_cers", "04_ncs", "05_controls", "06_cross_model", "07_protocol", "08_methods"):
        counted = published[notebook]["computed"] + published[notebook]["read_back"]
        planned = STEPS[notebook].planned_forwards(declared_parameters(notebook))
        assert 0.9 <= planned / counted <= 1.1, (notebook, planned, counted)
