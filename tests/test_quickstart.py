"""README's quick start runs as written, its numbers are the engine's per-set probe calls, and the front door of
run_head_sets refuses inputs whose parts disagree before any forward."""

import re

import pytest
import torch

from helpers.engine import HIDE, Intervention, build_batch, probe, run_head_sets, wrap_model
from helpers.engine.attention import ATTENTION
from helpers.storage import paths
from tests.tiny_models import tiny_inputs, tiny_model


def _quick_start() -> str:
    """The first Python block of README's "Quick start" section."""
    readme = (paths.ROOT / "README.md").read_text()
    section = readme[readme.index("## Quick start") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.fixture(scope="module")
def quick_start():
    names = {}
    exec(compile(_quick_start(), "README.md quick start", "exec"), names)
    return names


@torch.no_grad()
def test_quick_start_runs_and_matches_probe(quick_start):
    lm, batch, mass, S, heads, logits = (quick_start[n] for n in ("lm", "batch", "mass", "S", "heads", "logits"))
    L, H = len(lm.adapter.candidate_layers), lm.adapter.n_heads
    assert tuple(mass.shape) == (L, H) and bool(((mass >= 0) & (mass <= 1)).all())
    assert int(S.sum()) == 8 and bool((torch.as_tensor(S) == (mass >= mass.flatten().topk(8).values[-1])).all())
    assert tuple(heads.shape) == (21, L, H) and tuple(logits.shape[:2]) == (21, 1)
    clean = lm.model(**batch.inputs).logits[:, -1]  # [1, V]
    for copy in (0, 7, 20):  # S and two random sets: each copy is the probe call of its own set
        one = torch.as_tensor(heads[copy : copy + 1])
        with probe(lm, intervene=Intervention(heads=one, keys=batch.image_mask, bias=HIDE)):
            expected = lm.model(**batch.inputs).logits[:, -1]
        torch.testing.assert_close(logits[copy], expected, atol=1e-4, rtol=0)
    assert (logits[0] - clean).abs().max() > 1e-2  # hiding the image from S changes the answer's logits


@torch.no_grad()
def test_sliced_packed_batch_is_refused(quick_start):
    """The natural guess for one item, a batch's inputs sliced [:1]: Qwen's packed pixel rows keep 1 of the item's
    patches while image_grid_thw still gives the whole grid; refused with that reason, not run."""
    lm, item = quick_start["lm"], quick_start["item"]
    two = build_batch(lm.processor, [item, item])
    sliced = {name: value[:1] for name, value in two.inputs.items()}
    heads = quick_start["heads"]
    patches = int(two.inputs["image_grid_thw"][0].prod())
    with pytest.raises(ValueError, match=rf"pixel_values holds 1 patch rows but image_grid_thw .* says {patches}"):
        run_head_sets(lm, sliced, heads, keys=two.image_mask[:1], bias=HIDE)
    with pytest.raises(ValueError, match="the Batch holds 2 items; pass a Batch of one item"):
        run_head_sets(lm, two, heads, keys=two.image_mask[:1], bias=HIDE)
    with pytest.raises(ValueError, match=r"the inputs hold 2 items \(input_ids \(2, "):
        run_head_sets(lm, two.inputs, heads, keys=two.image_mask[:1], bias=HIDE)
    with pytest.raises(TypeError, match="item is a list; pass an Item, a Batch of one item or a processor output"):
        run_head_sets(lm, [item], heads, keys=two.image_mask[:1], bias=HIDE)


@torch.no_grad()
def test_inputs_that_disagree_are_refused():
    """Image tokens against the pixels and the attention mask, on a tiny packed Qwen3-VL (no weights loaded)."""
    lm = wrap_model(tiny_model("qwen3_vl", ATTENTION))
    item = {
        name: value[1:] if value.shape[0] == 2 else value[value.shape[0] // 2 :]
        for name, value in tiny_inputs("qwen3_vl", lm.model).items()
    }  # batch row 1 and its own pixel rows
    image = lm.adapter.image_positions(item["input_ids"])
    heads = torch.zeros(1, len(lm.adapter.candidate_layers), lm.adapter.n_heads, dtype=torch.bool)
    heads[0, 1, 0] = True
    run_head_sets(lm, item, heads, image, HIDE)  # the item as it is runs
    fewer = dict(item, input_ids=torch.where(image.cumsum(1) == 1, 5, item["input_ids"]))  # one image token less
    with pytest.raises(ValueError, match=r"input_ids hold \d+ image tokens but image_grid_thw .* gives"):
        run_head_sets(lm, fewer, heads, image, HIDE)
    hidden = dict(item, attention_mask=torch.where(image, 0, item["attention_mask"]))
    with pytest.raises(ValueError, match="the attention mask hides some image tokens"):
        run_head_sets(lm, hidden, heads, image, HIDE)
    no_pixels = {name: value for name, value in item.items() if name != "pixel_values"}
    with pytest.raises(ValueError, match=r"input_ids hold \d+ image tokens but the inputs lack pixel_values"):
        run_head_sets(lm, no_pixels, heads, image, HIDE)


@torch.no_grad()
def test_models_run_are_not_kept_alive():
    """The engine's per-model registries hold weak references: a model run once is freed once its last user lets go."""
    import gc
    import weakref

    lm = wrap_model(tiny_model("qwen3_vl", ATTENTION))
    inputs = tiny_inputs("qwen3_vl", lm.model, lengths=(3,))
    heads = torch.zeros(1, len(lm.adapter.candidate_layers), lm.adapter.n_heads, dtype=torch.bool)
    heads[0, 0, 0] = True
    run_head_sets(lm, inputs, heads, lm.adapter.image_positions(inputs["input_ids"]), HIDE)
    model = weakref.ref(lm.model)
    del lm
    gc.collect()
    assert model() is None, "a registry of the engine still holds the model"
