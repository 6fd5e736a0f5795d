"""torch.compile'd decoder layers give the eager layers' results on every engine path (helpers.engine.compiled);
the small-attention path (two matmuls around a softmax) gives sdpa's."""

import numpy as np
import pytest
import torch

from helpers.engine import HIDE, Read, attention, build_batch, compile_decoder_layers, load_model, probe, run_head_sets
from helpers.engine.mcq import letter_probs
from helpers.stimuli.corpora import grid_items, load_corpus, single_image_items


@pytest.fixture(scope="module")
def toy():
    lm = load_model("toy")
    corpus = load_corpus("co")
    single = build_batch(lm.processor, single_image_items(corpus, 1, 0, "matched"))
    grid = build_batch(lm.processor, grid_items(corpus, 1, 0))
    n_layers, n_heads = len(lm.adapter.candidate_layers), lm.adapter.n_heads
    generator = torch.Generator().manual_seed(0)
    sets = torch.rand(5, n_layers, n_heads, generator=generator) < 0.1  # [5, L, H]
    sets[:, 1, 0] = True  # every set holds a head
    return lm, single, grid, sets


def _paths(lm, single, grid, sets) -> dict:
    """Logits (or masses) of each path the notebooks take: one item, copies at every row, copies with their
    own keys (steering to two cells), copies continued from an unchanged prefix (the last row), a read."""
    keys = torch.zeros(2 * len(sets), grid.inputs["input_ids"].shape[1], dtype=torch.bool)
    keys[: len(sets)] = grid.image_mask
    keys[len(sets) :, grid.image_mask[0].nonzero()[0]] = True
    with probe(lm, read=Read(query_rows="all", groups={"image": single.image_mask})) as read:
        lm.model(**single.inputs)
    return {
        "one item": letter_probs(lm.model, lm.processor, single),
        "copies, every row": run_head_sets(lm, single.inputs, sets, single.image_mask, HIDE, "all", 1),
        "copies, own keys": run_head_sets(lm, grid.inputs, torch.cat([sets, sets]), keys, 10.0, "all", 1),
        "copies, last row": run_head_sets(
            lm, single.inputs, sets, single.image_mask, HIDE, single.last_prompt_mask, 1
        ),
        "read": read.mass,
    }


@torch.no_grad()
def test_compiled_layers_equal_the_eager_ones(toy):
    lm, single, grid, sets = toy
    eager = _paths(lm, single, grid, sets)
    compile_decoder_layers(lm)
    layers = lm.adapter.language_model(lm.model).layers
    compiled_forwards = [layer.forward for layer in layers]
    compile_decoder_layers(lm)  # a second call changes nothing
    assert lm.compiled and [layer.forward for layer in layers] == compiled_forwards
    compiled = _paths(lm, single, grid, sets)
    for name in eager:
        torch.testing.assert_close(compiled[name], eager[name], atol=1e-5, rtol=1e-6, msg=name)  # logits up to ~20
    assert (eager["copies, every row"][0] - eager["copies, every row"][1]).abs().max() > 1e-3  # sets differ


@torch.no_grad()
def test_compiled_layers_hide_and_steer_inside_their_graph_and_keep_the_guards(toy, monkeypatch):
    """Under compiled layers a hide or a steer never reaches the eager attention (one graph per layer; the last
    layer at the kept rows alone runs eagerly), a read does; the guards still refuse a HIDE that leaves a row no
    key, and the intervened layers are counted."""
    lm, single, grid, sets = toy
    compile_decoder_layers(lm)
    eager_calls = []
    apply = attention._apply
    monkeypatch.setattr(attention, "_apply", lambda *args, **kw: eager_calls.append(1) or apply(*args, **kw))
    run_head_sets(lm, single.inputs, sets, single.image_mask, HIDE, "all")  # every row kept: no eager last layer
    run_head_sets(lm, single.inputs, sets, single.image_mask, 5.0, single.last_prompt_mask)
    assert eager_calls == []
    with probe(lm, read=Read(query_rows="all", groups={"image": single.image_mask})):
        lm.model(**single.inputs)
    assert len(eager_calls) == len(lm.adapter.candidate_layers)
    every_key = torch.ones_like(single.image_mask)
    with pytest.raises(ValueError, match="hides every key that query row 0"):
        run_head_sets(lm, single.inputs, sets, every_key, HIDE, "all", 1)


@torch.no_grad()
def test_small_attention_equals_sdpa(toy, monkeypatch):
    lm, single, grid, sets = toy
    calls = []
    for name in ("_scores", "_in_graph"):  # the eager small path's logits; the compiled layers' attention
        counted = getattr(attention, name)
        monkeypatch.setattr(attention, name, lambda *args, counted=counted: calls.append(1) or counted(*args))
    small = _paths(lm, single, grid, sets)
    assert len(calls) >= 5 * len(lm.adapter.candidate_layers)  # every path went through the small attention
    monkeypatch.setattr(attention, "SMALL_KEYS", 0)  # every call through sdpa
    for name, value in _paths(lm, single, grid, sets).items():
        torch.testing.assert_close(small[name], value, atol=1e-5, rtol=0, msg=name)


def test_forked_workers_compile_without_waiting_on_the_parent(tmp_path, monkeypatch):
    """Workers forked from a process with compiled layers compile the kinds of forward their parent has not
    run yet (here every kind: the parent forks before its first forward) and give the eager results."""
    from helpers.measures.steering import steering_run
    from helpers.storage import workers
    from helpers.storage.cache import ResultCache

    sets = np.zeros((3, 8, 16), dtype=bool)
    sets[:, 2, :4] = True
    sets[1, 5, 7] = sets[2, 0, 1] = True
    eager = load_model("toy")
    compiled = load_model("toy")
    compile_decoder_layers(compiled)
    monkeypatch.setenv(workers.WORKERS_ENV, "2")
    runs = {}
    for name, lm in (("compiled", compiled), ("eager", eager)):
        cache = ResultCache(tmp_path / name)
        runs[name] = steering_run(lm, "co", 8, 0, sets, 10.0, "all", cache, chunk=2)
    for key in runs["eager"]:
        np.testing.assert_allclose(runs["compiled"][key], runs["eager"][key], atol=1e-6, rtol=0, err_msg=key)


def test_causal_rows_only_where_no_row_sees_a_later_key():
    lowest = torch.finfo(torch.float32).min
    causal = torch.full((40, 44), lowest).triu(5)[None, None]  # [1, 1, q, k]: row i sees keys 0 .. i + 4
    assert attention.causal_rows(causal)
    assert not attention.causal_rows(causal[..., 9:, :])  # 31 rows: too few to split
    causal[0, 0, 3, 20] = 0.0  # in place: row 3 now sees a later key
    assert not attention.causal_rows(causal)
    blind = torch.full((40, 44), lowest).triu(5)[None, None]
    blind[0, 0, 7] = lowest  # row 7 sees no key: its weights spread over every key the block holds
    assert not attention.causal_rows(blind)
    padded = torch.full((2, 1, 40, 44), lowest).triu(5)
    padded[1, :, :, :3] = lowest  # the second row's first keys are padding
    assert attention.causal_rows(padded)


@pytest.mark.parametrize("q_len, k_len", [(43, 47), (64, 68), (40, 40), (32, 100), (33, 48)])
def test_causal_blocks_cover_each_row_once_with_every_key_it_sees(q_len, k_len):
    blocks = attention.causal_blocks(q_len, k_len)
    rows = [row for block, _ in blocks for row in range(q_len)[block]]
    assert rows == list(range(q_len))
    for block, seen in blocks:
        assert k_len - q_len + block.stop <= seen <= k_len  # the block's last row sees keys 0 .. k - q + stop - 1
        assert seen % attention.KEY_STEP == 0 or seen == k_len
    assert attention.causal_blocks(43, 47) == [(slice(0, 12), 16), (slice(12, 28), 32), (slice(28, 43), 47)]


def test_causal_blocks_give_the_whole_rows_attention():
    generator = torch.Generator().manual_seed(0)
    query = torch.randn(3, 4, 40, 8, generator=generator)  # [B, H, q, D]
    key, value = (torch.randn(3, 2, 40, 8, generator=generator) for _ in range(2))  # [B, Hkv, q, D]
    first_key, first_value = (torch.randn(1, 2, 4, 8, generator=generator) for _ in range(2))  # [1, Hkv, p0, D]
    mask = torch.full((40, 44), torch.finfo(torch.float32).min).triu(5)[None, None]  # [1, 1, q, k]
    gate = torch.rand(3, 4, 1, 1, generator=generator) < 0.5
    addend = torch.randn(3, 1, 40, 44, generator=generator)
    inputs = (query, key, value, 0.3, mask, gate, addend, first_key, first_value)
    assert attention.causal_rows(mask) and len(attention.causal_blocks(40, 44)) == 3
    whole = attention._in_graph(*inputs, False)
    assert whole.shape == (3, 40, 4, 8) and whole.is_contiguous()
    torch.testing.assert_close(attention._in_graph(*inputs, True), whole, atol=1e-6, rtol=0)


@torch.no_grad()
def test_static_graphs_take_any_batch_and_give_way_to_the_symbolic_one(toy, monkeypatch):
    """Copies at every row run the static graph in row blocks, the last row alone in one; a new number of
    sets compiles nothing; past STATIC_SHAPES (rows, keys) pairs a layer runs its symbolic graph, with the eager
    results either way."""
    from torch._dynamo.utils import counters

    from helpers.engine import compiled as compiled_module

    lm, single, grid, sets = toy
    every_row = run_head_sets(lm, single.inputs, sets, single.image_mask, HIDE, "all", 1)
    steered = run_head_sets(lm, grid.inputs, sets, grid.image_mask, 10.0, "all", 1)
    compile_decoder_layers(lm)
    layer = lm.adapter.language_model(lm.model).layers[1]
    ran = []
    for name in ("static", "symbolic"):
        monkeypatch.setattr(
            layer.forward,
            name,
            lambda *a, run=getattr(layer.forward, name), name=name, **k: ran.append(name) or run(*a, **k),
        )
    blocks = []
    causal_rows = attention.causal_rows
    monkeypatch.setattr(attention, "causal_rows", lambda mask: blocks.append(causal_rows(mask)) or blocks[-1])
    run_head_sets(lm, single.inputs, sets, single.image_mask, HIDE, "all", 1)
    assert ran == ["static"] and set(blocks) == {True}
    graphs = counters["stats"]["unique_graphs"]
    torch.testing.assert_close(
        run_head_sets(lm, single.inputs, sets[:3], single.image_mask, HIDE, "all", 1),
        every_row[:3],
        atol=1e-5,
        rtol=1e-6,
    )
    assert counters["stats"]["unique_graphs"] == graphs  # the batch is a symbol of the static graph
    blocks.clear()
    run_head_sets(lm, single.inputs, sets, single.image_mask, HIDE, single.last_prompt_mask, 1)
    assert set(blocks) == {False}  # the last row alone: nothing to split
    ran.clear()
    monkeypatch.setattr(compiled_module, "STATIC_SHAPES", 1)
    # its one static shape taken by another (earlier tests may have given the grid's shape a static graph)
    monkeypatch.setattr(layer.forward, "static_shapes", {(0, 0)})
    torch.testing.assert_close(
        run_head_sets(lm, grid.inputs, sets, grid.image_mask, 10.0, "all", 1), steered, atol=1e-5, rtol=1e-6
    )
    assert ran == ["symbolic"]
