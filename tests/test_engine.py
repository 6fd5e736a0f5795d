"""The head-probe engine against an eager oracle, on tiny random models of every supported family."""

import pytest
import torch
from transformers.masking_utils import AttentionMaskInterface, eager_mask

from helpers.engine import (
    ATTENTION,
    HIDE,
    Intervention,
    Read,
    expand_item,
    head_sets,
    heads_to_mask,
    kept_rows,
    probe,
    run_head_sets,
    stack_head_sets,
    wrap_model,
)
from helpers.engine.head_sets import _from_prefix
from helpers.engine.kept_rows import kept_rows as eager_kept_rows
from tests.oracle import ORACLE, biased
from tests.tiny_models import CONFIGS, IMAGE_TOKEN, VISION_END, VISION_START, tiny_inputs, tiny_model

FAMILIES = sorted(CONFIGS)


@pytest.fixture(scope="module", params=FAMILIES)
def family(request):
    family = request.param
    probed = wrap_model(tiny_model(family, ATTENTION))
    eager = tiny_model(family, "eager")
    oracle = tiny_model(family, ORACLE)
    inputs = tiny_inputs(family, probed.model)
    return family, probed, eager, oracle, inputs


def _second_row(inputs: dict) -> dict:
    """Batch row 1 alone (no padding): per-row tensors [2, ...] and the second half of per-image ones (one image a
    row); Molmo 2's pooling indices then count from the row's own first patch."""
    item = {k: v[1:] if v.shape[0] == 2 else v[v.shape[0] // 2 :] for k, v in inputs.items()}
    if "image_token_pooling" in item:  # [tokens, pool_h * pool_w] into the batch's patches, -1: padding
        skipped = inputs["pixel_values"].shape[:2].numel() // 2  # row 0's patches
        item["image_token_pooling"] = torch.where(
            item["image_token_pooling"] >= 0, item["image_token_pooling"] - skipped, -1
        )
    return item


def _groups(lm, inputs):
    image = lm.adapter.image_positions(inputs["input_ids"])
    real = inputs["attention_mask"].bool()
    first_half = image & (image.cumsum(1) <= image.sum(1, keepdim=True) // 2)
    return {"image": image, "first_half": first_half, "text": real & ~image}


def _eager_mass(attentions, groups, rows):
    """Oracle mass [B, L, H, G] from eager attentions: sum over the group's keys, mean over the rows."""
    att = torch.stack(attentions, 1)  # [B, L, H, Q, K]
    K = att.shape[-1]
    padded = [torch.nn.functional.pad(g, (0, max(0, K - g.shape[1])))[:, :K] for g in groups.values()]  # [B, K]
    per_group = [(att * g[:, None, None, None, :].float()).sum(-1) for g in padded]
    mass = torch.stack(per_group, -1)  # [B, L, H, Q, G]
    weight = rows[:, None, None, :, None].float()
    return (mass * weight).sum(3) / weight.sum(3)


@torch.no_grad()
def test_read_matches_eager_prefill(family):
    name, lm, eager, _, inputs = family
    T = inputs["input_ids"].shape[1]
    rows = torch.zeros(2, T, dtype=torch.bool)
    rows[:, [T - 1, T - 4]] = True
    rows[1, T - 2] = True  # rows may differ per batch row
    groups = _groups(lm, inputs)
    with probe(lm, read=Read(query_rows=rows, groups=groups, per_row=True)) as rec:
        logits = lm.model(**inputs).logits
    reference = eager(**inputs, output_attentions=True)
    expected = _eager_mass(reference.attentions, groups, rows)
    assert rec.mass.shape == (2, len(lm.adapter.candidate_layers), lm.adapter.n_heads, 3)
    torch.testing.assert_close(rec.mass, expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(logits, reference.logits, atol=1e-5, rtol=0)
    assert rec.row_positions.tolist() == [[T - 4, T - 1, -1], [T - 4, T - 2, T - 1]]
    torch.testing.assert_close(rec.mass_per_row.nanmean(3), rec.mass, atol=1e-6, rtol=0)
    only_first = torch.zeros_like(rows)
    only_first[:, T - 4] = True
    torch.testing.assert_close(
        rec.mass_per_row[:, :, :, 0], _eager_mass(reference.attentions, groups, only_first), atol=1e-5, rtol=0
    )
    assert torch.isnan(rec.mass_per_row[0, :, :, 2]).all()


@torch.no_grad()
def test_read_matches_eager_decode(family):
    name, lm, eager, _, inputs = family
    T = inputs["input_ids"].shape[1]
    rows = torch.zeros(2, T + 3, dtype=torch.bool)
    rows[:, [T - 3, T - 1, T, T + 1]] = True  # prompt rows (prefill) and generated tokens (decode steps)
    groups = _groups(lm, inputs)
    with probe(lm, read=Read(query_rows=rows, groups=groups)) as rec:
        generated = lm.model.generate(**inputs, max_new_tokens=3, do_sample=False)
    reference = eager(**_extended(inputs, generated), output_attentions=True)
    error = (rec.mass - _eager_mass(reference.attentions, groups, rows)).abs().max()
    assert error < 1e-5, float(error)


def _extended(inputs, input_ids):
    """The prompt's inputs with ``input_ids`` [B, T + n]: the prompt followed by n text tokens."""
    n = input_ids.shape[1] - inputs["input_ids"].shape[1]
    batch = input_ids.shape[0]
    full = dict(
        inputs,
        input_ids=input_ids,
        attention_mask=torch.cat([inputs["attention_mask"], torch.ones(batch, n, dtype=torch.long)], 1),
    )
    for extra in ("mm_token_type_ids", "token_type_ids"):
        if extra in inputs:
            full[extra] = torch.cat([inputs[extra], torch.zeros(batch, n, dtype=torch.long)], 1)
    return full


def _oracle_logits(lm, oracle, inputs, heads, rows, keys, bias):
    """The oracle's logits [B, T, V] with the intervention written into its eager attention by hand."""
    width = inputs["input_ids"].shape[1]
    rows, keys = [torch.nn.functional.pad(m, (0, width - m.shape[1])) for m in (rows, keys)]  # [B, width]
    by_layer = {  # the oracle's layers: decoder-layer indices
        layer: (heads[:, candidate], rows, keys, torch.tensor([bias] * heads.shape[0]))
        for candidate, layer in enumerate(lm.adapter.candidate_layers)
    }
    with biased(by_layer):
        return oracle(**inputs).logits


def _cast(inputs, dtype):
    return {k: v.to(dtype) if v.is_floating_point() else v for k, v in inputs.items()}


@torch.no_grad()
def test_bf16_read_is_close_to_fp32_eager(family):
    name, lm, eager, _, inputs = family
    half = wrap_model(tiny_model(name, ATTENTION).to(torch.bfloat16))
    T = inputs["input_ids"].shape[1]
    rows = torch.zeros(2, T, dtype=torch.bool)
    rows[:, T - 4 :] = True
    groups = _groups(lm, inputs)
    with probe(half, read=Read(query_rows=rows, groups=groups)) as rec:
        half.model(**_cast(inputs, torch.bfloat16))
    expected = _eager_mass(eager(**inputs, output_attentions=True).attentions, groups, rows)
    error = (rec.mass.float() - expected).abs().max()
    assert error < 1e-2, float(error)


def _check_against_eager_and_oracle(lm, eager, oracle, inputs, keys="first_half"):
    """Read (every real row) and HIDE / steer of the key group `keys` (the last 3 rows) against eager and
    the oracle; max errors."""
    T = inputs["input_ids"].shape[1]
    groups = _groups(lm, inputs)
    real = inputs["attention_mask"].bool()
    with probe(lm, read=Read(query_rows=real, groups=groups)) as rec:
        lm.model(**inputs)
    read_error = (rec.mass - _eager_mass(eager(**inputs, output_attentions=True).attentions, groups, real)).abs().max()
    rows = torch.zeros_like(real)
    rows[:, T - 3 :] = True
    heads = _head_set(lm, 2)
    errors = [float(read_error)]
    for bias in (HIDE, 2.5):
        with probe(lm, intervene=Intervention(heads=heads, keys=groups[keys], bias=bias, query_rows=rows)):
            steered = lm.model(**inputs).logits
        expected = _oracle_logits(lm, oracle, inputs, heads, rows, groups[keys], bias)
        errors.append(float((steered - expected).abs().max()))
    return errors


@torch.no_grad()
def test_two_images_in_one_prompt(family):
    name, lm, eager, oracle, _ = family
    inputs = tiny_inputs(name, lm.model, n_images=2)
    assert (lm.adapter.image_positions(inputs["input_ids"]).sum(1) == 2 * _image_count(lm, name)).all()
    errors = _check_against_eager_and_oracle(lm, eager, oracle, inputs, keys="image")  # both images
    assert max(errors) < 1e-5, errors


def _image_count(lm, name):
    return int(lm.adapter.image_positions(tiny_inputs(name, lm.model)["input_ids"]).sum(1)[0])


@pytest.mark.parametrize("name", ["qwen3_vl", "qwen2_5_vl"])
@torch.no_grad()
def test_mixed_image_sizes_with_left_padding(name):
    lm = wrap_model(tiny_model(name, ATTENTION))
    eager, oracle = tiny_model(name, "eager"), tiny_model(name, ORACLE)
    inputs = tiny_inputs(name, lm.model, lengths=(3, 6), grids=[(4, 6), (2, 4)])  # 6 and 2 image tokens
    assert lm.adapter.image_positions(inputs["input_ids"]).sum(1).tolist() == [6, 2]
    assert inputs["attention_mask"][1].sum() < inputs["attention_mask"].shape[1]  # row 1 is left-padded
    errors = _check_against_eager_and_oracle(lm, eager, oracle, inputs)
    assert max(errors) < 1e-5, errors


def _head_set(lm, batch):
    """Different heads per batch row, in two layers; batch row 1 also in the last layer."""
    L = len(lm.adapter.candidate_layers)
    sets = [[(1, 0), (1, 3)], [(0, 2), (L - 1, 1), (L - 1, 2)]][:batch]
    return stack_head_sets(lm.adapter, sets)


MIXTURE_FAMILIES = ("qwen3_vl_moe",)


@pytest.mark.parametrize("bias", [HIDE, 2.5])
@torch.no_grad()
def test_mask_and_steer_match_eager_reference(family, bias):
    name, lm, _, oracle, inputs = family
    T = inputs["input_ids"].shape[1]
    heads = _head_set(lm, 2)  # [B, L, H]
    keys = _groups(lm, inputs)["first_half"]
    rows = torch.zeros(2, T, dtype=torch.bool)
    rows[:, T - 3 :] = True
    expected = _oracle_logits(lm, oracle, inputs, heads, rows, keys, bias)
    clean = lm.model(**inputs).logits
    with probe(lm, intervene=Intervention(heads=heads, keys=keys, bias=bias, query_rows=rows)):
        steered = lm.model(**inputs).logits
    torch.testing.assert_close(steered, expected, atol=1e-5, rtol=0)
    assert (steered - clean).abs().max() > 1e-4  # the intervention took effect
    before = inputs["attention_mask"].bool() & (torch.arange(T) < T - 3)  # real rows before the chosen ones
    if name in MIXTURE_FAMILIES:  # experts run the tokens routed to them as one matmul: when a later row is
        # routed elsewhere, an earlier row's expert matmul has another shape and rounds differently
        torch.testing.assert_close(steered[before], clean[before], atol=1e-6, rtol=0)
    else:
        assert torch.equal(steered[before], clean[before])  # (pad rows see every key: skipped)


def _attention_outputs(lm, inputs):
    """Per-head attention outputs [B, T, H, D] of every layer (the o_proj input)."""
    seen = []
    modules = lm.adapter.attention_modules(lm.model)
    projections = [getattr(m, "o_proj", None) or m.out_proj for m in modules]  # LFM2 names it out_proj
    hooks = [p.register_forward_pre_hook(lambda mod, args: seen.append(args[0].clone())) for p in projections]
    try:
        lm.model(**inputs)
    finally:
        for hook in hooks:
            hook.remove()
    return [x.view(*x.shape[:2], lm.adapter.n_heads, -1) for x in seen]


@torch.no_grad()
def test_heads_outside_the_set_are_bit_identical(family):
    name, lm, _, _, inputs = family
    heads = stack_head_sets(lm.adapter, [[(1, 0), (1, 3)], [(1, 2)]])  # only layer 1
    keys = _groups(lm, inputs)["image"]
    clean = _attention_outputs(lm, inputs)
    with probe(lm, intervene=Intervention(heads=heads, keys=keys, bias=HIDE)):
        masked = _attention_outputs(lm, inputs)
    assert torch.equal(masked[0], clean[0])  # layer below: untouched
    inside = heads[:, 1]  # [B, H]
    for b in range(2):
        for h in range(lm.adapter.n_heads):
            same = torch.equal(masked[1][b, :, h], clean[1][b, :, h])
            assert same != bool(inside[b, h]), (b, h)


@torch.no_grad()
def test_zero_bias_and_empty_set_change_nothing(family):
    name, lm, _, _, inputs = family
    keys = _groups(lm, inputs)["image"]
    clean = lm.model(**inputs).logits
    with probe(lm, intervene=Intervention(heads=_head_set(lm, 2), keys=keys, bias=0.0)):
        zero_bias = lm.model(**inputs).logits
    empty = torch.zeros(2, len(lm.adapter.candidate_layers), lm.adapter.n_heads, dtype=torch.bool)
    with probe(lm, intervene=Intervention(heads=empty, keys=keys, bias=HIDE)):
        empty_set = lm.model(**inputs).logits
    assert torch.equal(zero_bias, clean)
    assert torch.equal(empty_set, clean)


@torch.no_grad()
def test_batched_head_sets_equal_sequential(family):
    name, lm, _, _, inputs = family
    item = _second_row(inputs)
    L, H = len(lm.adapter.candidate_layers), lm.adapter.n_heads
    sets = [[(0, 1), (L - 1, 3)], [(1, 0)], [], [(l, h) for l in range(L) for h in range(0, H, 2)]]
    heads = stack_head_sets(lm.adapter, sets)  # [4, L, H]
    image = lm.adapter.image_positions(item["input_ids"])  # [1, T]
    betas = torch.tensor([4.0, -3.0, 4.0, 1.5])
    batch = expand_item(item, len(sets))
    with probe(lm, intervene=Intervention(heads=heads, keys=image.expand(4, -1), bias=betas)):
        batched = lm.model(**batch).logits
    for i, _head_set in enumerate(sets):
        with probe(lm, intervene=Intervention(heads=heads[i : i + 1], keys=image, bias=float(betas[i]))):
            alone = lm.model(**item).logits
        torch.testing.assert_close(batched[i : i + 1], alone, atol=1e-5, rtol=0)
    assert (batched[0] - batched[2]).abs().max() > 1e-5  # different sets, different outputs


@pytest.mark.parametrize("lowest", [0, 1])
@torch.no_grad()
def test_run_head_sets_equals_batched_and_sequential(family, lowest):
    """The fast path (vision tower and layers below the first intervened one run once) == plain batch == loop."""
    name, lm, _, _, inputs = family
    item = _second_row(inputs)
    L, H = len(lm.adapter.candidate_layers), lm.adapter.n_heads
    sets = [[(lowest, 1), (L - 1, 3)], [(L - 1, 0)], [], [(l, h) for l in range(lowest, L) for h in range(0, H, 2)]]
    heads = stack_head_sets(lm.adapter, sets)  # [4, L, H]
    keys = lm.adapter.image_positions(item["input_ids"])  # [1, T]
    T = keys.shape[1]
    rows = torch.zeros(1, T, dtype=torch.bool)
    rows[:, T - 5 :] = True
    betas = torch.tensor([4.0, -3.0, 4.0, HIDE])
    fast = run_head_sets(lm, item, heads, keys, betas, rows)  # [4, T, V]
    with probe(
        lm, intervene=Intervention(heads=heads, keys=keys.expand(4, -1), bias=betas, query_rows=rows.expand(4, -1))
    ):
        batched = lm.model(**expand_item(item, 4)).logits
    torch.testing.assert_close(fast, batched, atol=1e-5, rtol=0)
    for i in range(len(sets)):
        with probe(
            lm, intervene=Intervention(heads=heads[i : i + 1], keys=keys, bias=float(betas[i]), query_rows=rows)
        ):
            alone = lm.model(**item).logits
        torch.testing.assert_close(fast[i : i + 1], alone, atol=1e-5, rtol=0)
    assert (fast[0] - fast[2]).abs().max() > 1e-5
    empty = run_head_sets(lm, item, torch.zeros(2, L, H, dtype=torch.bool), keys, HIDE)
    torch.testing.assert_close(empty, lm.model(**item).logits.expand(2, -1, -1), atol=1e-5, rtol=0)


@pytest.mark.parametrize("bias", [HIDE, 2.5])
@pytest.mark.parametrize("last_rows", [0, 5])
@torch.no_grad()
def test_run_head_sets_with_one_bias_for_all_copies_equals_the_loop(family, bias, last_rows):
    """Copies with the same keys, rows and bias (the engine builds their biased mask once) == one call per set."""
    name, lm, _, _, inputs = family
    item = _second_row(inputs)
    L, H = len(lm.adapter.candidate_layers), lm.adapter.n_heads
    sets = [[(0, 1), (L - 1, 3)], [(1, 0), (L - 1, 2)], [], [(l, h) for l in range(L) for h in range(1, H, 2)]]
    heads = stack_head_sets(lm.adapter, sets)  # [4, L, H]
    keys = lm.adapter.image_positions(item["input_ids"])  # [1, T]
    rows = "all"
    if last_rows:
        rows = torch.zeros_like(keys)
        rows[:, -last_rows:] = True
    fast = run_head_sets(lm, item, heads, keys, bias, rows)  # [4, T, V]
    for i in range(len(sets)):
        with probe(lm, intervene=Intervention(heads=heads[i : i + 1], keys=keys, bias=bias, query_rows=rows)):
            alone = lm.model(**item).logits
        torch.testing.assert_close(fast[i : i + 1], alone, atol=1e-5, rtol=0)
    assert (fast[0] - fast[2]).abs().max() > 1e-5


@pytest.mark.parametrize(("last_rows", "keep", "per_forward"), [(1, 1, 4), (5, 1, 4), (5, 3, 1)])
@torch.no_grad()
def test_run_head_sets_from_an_unchanged_prefix_equals_the_loop(family, monkeypatch, last_rows, keep, per_forward):
    """Rows after every image token: the prefix runs once into a cache and the copies continue from it (in forwards
    of per_forward copies); their kept logits == one full probe call per set. Padded items run whole copies."""
    name, lm, _, _, inputs = family
    item = _second_row(inputs)
    L, H = len(lm.adapter.candidate_layers), lm.adapter.n_heads
    sets = [[(0, 1), (L - 1, 3)], [(1, 0), (L - 1, 2)], [], [(l, h) for l in range(L) for h in range(1, H, 2)]]
    heads = stack_head_sets(lm.adapter, sets)  # [4, L, H]
    betas = torch.tensor([HIDE, 3.0, HIDE, -2.0])
    seen = []
    monkeypatch.setattr(head_sets, "_from_prefix", lambda *a: seen.append(a[-2]) or _from_prefix(*a))

    real = item["attention_mask"][0].bool()
    assert not real.all()  # the fixture's batch row 1 has left pads
    last = torch.zeros_like(real)[None]
    last[:, -1] = True
    run_head_sets(lm, item, heads, lm.adapter.image_positions(item["input_ids"]), betas, last, logits_to_keep=1)
    assert seen == []
    item = {k: v[:, real] if v.shape == real[None].shape else v for k, v in item.items()}  # the pads dropped

    keys = lm.adapter.image_positions(item["input_ids"])  # [1, T]
    T = keys.shape[1]
    assert int(keys[0].nonzero().max()) < T - last_rows  # the image lies in the prefix
    rows = torch.zeros_like(keys)
    rows[:, -last_rows:] = True
    fast = run_head_sets(lm, item, heads, keys, betas, rows, logits_to_keep=keep, max_tokens=per_forward * T)
    recurrent = name in ("lfm2_vl", "qwen3_5")  # their convolution / linear-attention layers: whole copies
    assert lm.adapter.continues_from_cache != recurrent
    whole = recurrent or name == "gemma4"  # Gemma 4's later layers reuse earlier layers' keys: whole copies
    assert seen == ([] if whole else [T - last_rows]) and fast.shape[:2] == (4, keep)
    for i in range(len(sets)):
        with probe(
            lm, intervene=Intervention(heads=heads[i : i + 1], keys=keys, bias=float(betas[i]), query_rows=rows)
        ):
            alone = lm.model(**item).logits[:, -keep:]
        torch.testing.assert_close(fast[i : i + 1], alone, atol=1e-5, rtol=0)
    assert (fast[0] - fast[2]).abs().max() > 1e-5
    seen.clear()
    run_head_sets(lm, item, heads, keys, betas, rows)  # every position's logits: whole copies
    assert seen == []


@pytest.mark.parametrize("keys_at", ["image", "last image token", "after the image"])
@torch.no_grad()
def test_run_head_sets_continues_the_rows_before_the_first_key(family, monkeypatch, keys_at):
    """Rows "all": rows before the first biased key see none of them, so they are the clean item's and the copies
    run only the rest; an image the first key falls inside goes whole with the rest (the vision tower with it),
    an image before the first key stays with the clean rows. Kept logits == one full probe call per set."""
    name, lm, _, _, inputs = family
    item = _second_row(inputs)
    real = item["attention_mask"][0].bool()
    item = {k: v[:, real] if v.shape == real[None].shape else v for k, v in item.items()}  # the pads dropped
    L, H = len(lm.adapter.candidate_layers), lm.adapter.n_heads
    sets = [[(0, 1), (L - 1, 3)], [(1, 0), (L - 1, 2)], [], [(l, h) for l in range(L) for h in range(1, H, 2)]]
    heads = stack_head_sets(lm.adapter, sets)  # [4, L, H]
    image = lm.adapter.image_positions(item["input_ids"])  # [1, T]
    first, last = int(image[0].nonzero().min()), int(image[0].nonzero().max())
    T = image.shape[1]
    keys = torch.zeros_like(image)
    if keys_at == "image":
        keys, start = image, first
    elif keys_at == "last image token":
        keys[:, last], start = True, first
    else:
        keys[:, last + 2 : T - 1], start = True, last + 2
    seen = []
    monkeypatch.setattr(head_sets, "_from_prefix", lambda *a: seen.append(a[-2]) or _from_prefix(*a))
    bias = HIDE if keys_at == "image" else 4.0
    head_sets.remember_item(lm, item)  # the clean item recorded: a few copies continue it however short its rows
    fast = run_head_sets(lm, item, heads, keys, bias, "all", logits_to_keep=2, max_tokens=3 * T)
    whole = not lm.adapter.continues_from_cache or name == "gemma4"
    assert seen == ([] if whole or start == 0 else [start])
    for i in range(len(sets)):
        with probe(lm, intervene=Intervention(heads=heads[i : i + 1], keys=keys, bias=bias, query_rows="all")):
            alone = lm.model(**item).logits[:, -2:]
        torch.testing.assert_close(fast[i : i + 1], alone, atol=1e-5, rtol=0)
    assert (fast[0] - fast[2]).abs().max() > 1e-5


@torch.no_grad()
def test_run_head_sets_continues_few_copies_only_from_a_remembered_item(family, monkeypatch):
    """Copies whose unchanged rows add up to less than one copy's run whole, unless remember_item recorded the clean
    item before; both give the loop's logits."""
    name, lm, _, _, inputs = family
    item = _second_row(inputs)
    real = item["attention_mask"][0].bool()
    item = {k: v[:, real] if v.shape == real[None].shape else v for k, v in item.items()}  # the pads dropped
    L = len(lm.adapter.candidate_layers)
    heads = stack_head_sets(lm.adapter, [[(0, 1), (L - 1, 0)]])  # [1, L, H]
    keys = lm.adapter.image_positions(item["input_ids"])  # [1, T]
    start = int(keys[0].nonzero().min())
    assert 0 < start < keys.shape[1]
    seen = []
    monkeypatch.setattr(head_sets, "_from_prefix", lambda *a: seen.append(a[-2]) or _from_prefix(*a))
    head_sets._CLEAN.stores.clear()
    first = run_head_sets(lm, item, heads, keys, HIDE, "all", logits_to_keep=1)
    assert seen == []
    head_sets.remember_item(lm, item)
    again = run_head_sets(lm, item, heads, keys, HIDE, "all", logits_to_keep=1)
    continues = lm.adapter.continues_from_cache and name != "gemma4"
    assert seen == ([start] if continues else [])
    with probe(lm, intervene=Intervention(heads=heads, keys=keys, bias=HIDE, query_rows="all")):
        alone = lm.model(**item).logits[:, -1:]
    torch.testing.assert_close(first, alone, atol=1e-5, rtol=0)
    torch.testing.assert_close(again, alone, atol=1e-5, rtol=0)


@torch.no_grad()
def test_run_head_sets_keeps_molmo2_markers_with_the_image(monkeypatch):
    """Molmo 2's processor puts the markers around the image (<im_start>, <im_col>, <im_end>) into the image tokens'
    bidirectional block: copies intervened from <im_end> on change the image rows before it, so the clean prefix
    they continue ends before the block's first position. Kept logits == one full probe call per set."""
    lm = wrap_model(tiny_model("molmo2", ATTENTION))
    item = tiny_inputs("molmo2", lm.model, lengths=(3,))  # [1, T], no pads
    ids = item["input_ids"]
    item["mm_token_type_ids"] = torch.isin(ids, torch.tensor([IMAGE_TOKEN, VISION_START, VISION_END])).long()
    rows = torch.zeros_like(ids, dtype=torch.bool)
    rows[:, int((ids[0] == VISION_END).nonzero()[0]) :] = True  # <im_end> and the text after it
    keys = lm.adapter.image_positions(ids)
    L, H = len(lm.adapter.candidate_layers), lm.adapter.n_heads
    heads = stack_head_sets(lm.adapter, [[(0, 1)], [(l, h) for l in range(L) for h in range(H)]])  # [2, L, H]
    seen = []
    monkeypatch.setattr(head_sets, "_from_prefix", lambda *a: seen.append(a[-2]) or _from_prefix(*a))
    head_sets.remember_item(lm, item)
    fast = run_head_sets(lm, item, heads, keys, 3.0, rows, logits_to_keep=1)  # [2, 1, V]
    assert seen == [int((ids[0] == VISION_START).nonzero()[0])]
    for i in range(2):
        with probe(lm, intervene=Intervention(heads=heads[i : i + 1], keys=keys, bias=3.0, query_rows=rows)):
            torch.testing.assert_close(fast[i : i + 1], lm.model(**item).logits[:, -1:], atol=1e-5, rtol=0)


BOUNDARIES = ("first image token", "after the image", "first prompt token")


def _boundary(image: torch.Tensor, boundary: str) -> int:
    """The position of ``boundary`` in an item whose one image (bool [1, T]) is followed by an end token and text."""
    first, last = int(image[0].nonzero().min()), int(image[0].nonzero().max())
    return {"first image token": first, "after the image": last + 1, "first prompt token": last + 2}[boundary]


@pytest.mark.parametrize("keep", [1, 0])
@pytest.mark.parametrize("boundary", BOUNDARIES)
@torch.no_grad()
def test_run_head_sets_from_each_image_boundary_matches_the_oracle(family, monkeypatch, boundary, keep):
    """The first intervened row at the first image token, at the token after the image (Ovis 2's visual indicator,
    whose embedding comes with the pixels) or at the first prompt token after it; keys: the image. With one kept
    logit the copies continue the clean rows before it; every kept logit == the eager oracle, and an empty set's
    == the clean forward's."""
    name, lm, _, oracle, inputs = family
    item = _second_row(inputs)
    real = item["attention_mask"][0].bool()
    item = {k: v[:, real] if v.shape == real[None].shape else v for k, v in item.items()}  # the pads dropped
    L, H = len(lm.adapter.candidate_layers), lm.adapter.n_heads
    sets = [[(0, 1), (L - 1, 3)], [(1, 0), (L - 1, 2)], [], [(l, h) for l in range(L) for h in range(1, H, 2)]]
    heads = stack_head_sets(lm.adapter, sets)  # [4, L, H]
    keys = lm.adapter.image_positions(item["input_ids"])  # [1, T]
    start = _boundary(keys, boundary)
    rows = torch.zeros_like(keys)
    rows[:, start:] = True
    betas = torch.tensor([HIDE, 3.0, HIDE, -2.0])
    seen = []
    monkeypatch.setattr(head_sets, "_from_prefix", lambda *a: seen.append(a[-2]) or _from_prefix(*a))
    head_sets.remember_item(lm, item)  # the clean item recorded: the copies continue it however few they are
    fast = run_head_sets(lm, item, heads, keys, betas, rows, logits_to_keep=keep)  # [4, keep or T, V]
    continues = keep == 1 and lm.adapter.continues_from_cache and name != "gemma4"
    assert seen == ([start] if continues else [])
    kept = slice(-keep, None) if keep else slice(None)
    for i in range(len(sets)):
        expected = _oracle_logits(lm, oracle, item, heads[i : i + 1], rows, keys, float(betas[i]))
        torch.testing.assert_close(fast[i : i + 1], expected[:, kept], atol=1e-5, rtol=0)
    assert (fast[0] - fast[2]).abs().max() > 1e-5
    empty = run_head_sets(lm, item, torch.zeros(2, L, H, dtype=torch.bool), keys, HIDE, rows, logits_to_keep=keep)
    torch.testing.assert_close(empty, lm.model(**item).logits[:, kept].expand(2, -1, -1), atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    ("rows_at", "keep", "last_layer_heads"),
    [("all", 1, True), ("all", 3, True), ("prompt", 1, False), ("prompt", 1, True)],
)
@torch.no_grad()
def test_run_head_sets_runs_the_last_layer_at_the_kept_rows(family, monkeypatch, rows_at, keep, last_layer_heads):
    """With logits_to_keep = k, the last decoder layer of a supported family computes queries, attention and MLP
    at the last k rows only; the kept logits == one full probe call per set. A copy that intervenes in the last
    layer at rows that are not kept gets the whole layer (its intervention changes nothing kept)."""
    name, lm, _, _, inputs = family
    item = _second_row(inputs)
    L, H = len(lm.adapter.candidate_layers), lm.adapter.n_heads
    top = [(L - 1, 3)] if last_layer_heads else []
    sets = [[(0, 1), *top], [(1, 0), (1, 2)], [], [(l, h) for l in range(L - 1) for h in range(1, H, 2)] + top]
    heads = stack_head_sets(lm.adapter, sets)  # [4, L, H]
    keys = lm.adapter.image_positions(item["input_ids"])  # [1, T]
    T = keys.shape[1]
    rows = "all"
    if rows_at == "prompt":
        rows = torch.zeros_like(keys)
        rows[:, T - 6 : T - 2] = True  # prompt rows before the kept ones
    ran = []
    monkeypatch.setattr(kept_rows, "kept_rows", lambda *a, **k: ran.append(a[2].shape) or eager_kept_rows(*a, **k))
    betas = torch.tensor([HIDE, 3.0, HIDE, -2.0])
    fast = run_head_sets(lm, item, heads, keys, betas, rows, logits_to_keep=keep)
    supported = kept_rows.supports(lm.adapter.language_model(lm.model).layers[-1])
    assert supported == (name == "qwen3_vl")
    assert bool(ran) == (supported and (rows_at == "all" or not last_layer_heads))
    for i in range(len(sets)):
        with probe(
            lm, intervene=Intervention(heads=heads[i : i + 1], keys=keys, bias=float(betas[i]), query_rows=rows)
        ):
            alone = lm.model(**item).logits[:, -keep:]
        torch.testing.assert_close(fast[i : i + 1], alone, atol=1e-5, rtol=0)
    assert (fast[0] - fast[2]).abs().max() > 1e-5


@torch.no_grad()
def test_run_head_sets_in_several_forwards_equals_one_and_runs_the_vision_tower_once(family, monkeypatch):
    """max_tokens below the copies' tokens: the copies go in forwards of 1 and 3; the vision tower runs once for
    the item, in the first call, and later calls on the same pixel tensor reuse its output."""
    name, lm, _, _, inputs = family
    item = _second_row(inputs)
    L, H = len(lm.adapter.candidate_layers), lm.adapter.n_heads
    sets = [[(0, 1), (L - 1, 3)], [(1, 0)], [], [(l, h) for l in range(L) for h in range(0, H, 2)], [(L - 1, 1)]]
    heads = stack_head_sets(lm.adapter, sets)  # [5, L, H]
    keys = lm.adapter.image_positions(item["input_ids"])  # [1, T]
    T = keys.shape[1]
    betas = torch.tensor([4.0, -3.0, 4.0, HIDE, 2.0])
    calls = []
    for owner in {type(m) for m in lm.model.modules() if "get_image_features" in type(m).__dict__}:
        original = owner.get_image_features
        monkeypatch.setattr(
            owner, "get_image_features", lambda self, *a, _f=original, **k: calls.append(1) or _f(self, *a, **k)
        )
    head_sets._VISION.stores.clear()
    whole = run_head_sets(lm, item, heads, keys, betas)  # [5, T, V], one forward
    assert len(calls) == ("pixel_values" in item)
    for copies in (1, 3):
        parts = run_head_sets(lm, item, heads, keys, betas, max_tokens=copies * T)
        torch.testing.assert_close(parts, whole, atol=1e-5, rtol=0)
    assert len(calls) == ("pixel_values" in item), f"get_image_features ran {len(calls)} times"
    pixels = {k: v.clone() if k.startswith("pixel") else v for k, v in item.items()}  # the same values, new tensors
    torch.testing.assert_close(run_head_sets(lm, pixels, heads, keys, betas), whole, atol=1e-5, rtol=0)
    assert len(calls) == 2 * ("pixel_values" in item)


@torch.no_grad()
def test_guards(family):
    name, lm, _, _, inputs = family
    T = inputs["input_ids"].shape[1]
    image = lm.adapter.image_positions(inputs["input_ids"])
    L, H = len(lm.adapter.candidate_layers), lm.adapter.n_heads
    with pytest.raises(ValueError, match=r"head \(0, 99\) is out of range"):
        heads_to_mask(lm.adapter, [(0, 99)])
    with pytest.raises(ValueError, match=rf"head \({L}, 0\) is out of range"):
        heads_to_mask(lm.adapter, [(L, 0)])
    heads = _head_set(lm, 2)
    with pytest.raises(ValueError, match="Intervention.keys selects no position in batch row"):
        with probe(lm, intervene=Intervention(heads=heads, keys=torch.zeros(2, T, dtype=torch.bool), bias=HIDE)):
            pass
    with pytest.raises(ValueError, match="key group 'panel' selects no position"):
        with probe(lm, read=Read(query_rows="all", groups={"panel": torch.zeros(2, T, dtype=torch.bool)})):
            pass
    with pytest.raises(ValueError, match=rf"needs \[batch, {L} candidate layers, {H} heads\]"):
        with probe(lm, intervene=Intervention(heads=torch.ones(2, L, H + 1, dtype=torch.bool), keys=image, bias=1.0)):
            pass
    with pytest.raises(RuntimeError, match=r"layers \[.*\] never ran"):
        with probe(lm, intervene=Intervention(heads=heads, keys=image, bias=1.0)):
            pass  # no forward: nothing was changed
    rows_after = torch.zeros(2, T + 5, dtype=torch.bool)
    rows_after[:, T + 4] = True  # a row the forward never reaches: a mask of another width
    with pytest.raises(ValueError, match=rf"Intervention.query_rows is {T + 5} positions wide, but .* {T} positions"):
        with probe(lm, intervene=Intervention(heads=heads, keys=image, bias=1.0, query_rows=rows_after)):
            lm.model(**inputs)
    with pytest.raises(ValueError, match="batch size 2, the forward has batch size 4"):
        with probe(lm, intervene=Intervention(heads=heads, keys=image, bias=1.0)):
            lm.model(**{k: torch.cat([v, v]) for k, v in inputs.items()})


@torch.no_grad()
def test_the_small_path_refuses_a_mask_that_is_not_zero_at_seen_keys(monkeypatch):
    """The small attention path adds the bias to logits that already hold the mask, which is exact only where the
    mask is 0 at the keys a row sees (eager_mask's masks); another mask is refused, not silently approximated."""
    lm = wrap_model(tiny_model("qwen3_vl", ATTENTION))
    inputs = tiny_inputs("qwen3_vl", lm.model)
    image = lm.adapter.image_positions(inputs["input_ids"])
    heads = stack_head_sets(lm.adapter, [[(1, 0)], [(1, 1)]])
    with probe(lm, intervene=Intervention(heads=heads, keys=image, bias=2.0)):
        lm.model(**inputs)  # eager_mask: accepted

    def shifted_mask(*args, **kwargs):
        mask = eager_mask(*args, **kwargs)
        return torch.where(mask == 0, torch.tensor(0.25, dtype=mask.dtype), mask)

    monkeypatch.setitem(AttentionMaskInterface._global_mapping, ATTENTION, shifted_mask)
    with pytest.raises(RuntimeError, match="mask holds values other than 0 at keys a row sees"):
        with probe(lm, intervene=Intervention(heads=heads, keys=image, bias=2.0)):
            lm.model(**inputs)


@torch.no_grad()
def test_selections_that_cannot_take_effect_are_refused(family):
    """HIDE of every key a row sees, keys that are pads / beyond T / in every chosen row's future, pad rows."""
    name, lm, _, _, inputs = family
    T = inputs["input_ids"].shape[1]
    real = inputs["attention_mask"].bool()  # row 1 is left-padded, row 0 is not
    pads = ~real
    heads = stack_head_sets(lm.adapter, [[], [(1, 0)]])  # only batch row 1 carries a head
    last = torch.zeros_like(real)
    last[:, T - 1] = True
    with pytest.raises(ValueError, match=r"hides every key that query row \d+ of batch row 1 can see .*layer 1"):
        with probe(lm, intervene=Intervention(heads=heads, keys=real, bias=HIDE, query_rows=last)):
            lm.model(**inputs)
    with pytest.raises(ValueError, match=r"no chosen row of batch row\(s\) \[1\] can see any selected key"):
        with probe(lm, intervene=Intervention(heads=heads, keys=pads, bias=HIDE)):
            lm.model(**inputs)
    beyond = torch.zeros(2, T + 3, dtype=torch.bool)
    beyond[:, T:] = True
    with pytest.raises(ValueError, match=rf"Intervention.keys is {T + 3} positions wide, but .* {T} positions"):
        with probe(lm, intervene=Intervention(heads=heads, keys=beyond, bias=2.0)):
            lm.model(**inputs)
    early = torch.zeros_like(real)
    early[:, T - 4] = True
    with pytest.raises(ValueError, match=r"no chosen row of batch row\(s\) \[1\] can see any selected key"):
        with probe(
            lm, intervene=Intervention(heads=heads, keys=last, bias=2.0, query_rows=early)
        ):  # keys in the future
            lm.model(**inputs)
    with pytest.raises(RuntimeError, match=r"rows never occurred in batch row\(s\) \[1\].*pad rows"):
        with probe(lm, intervene=Intervention(heads=heads, keys=real, bias=2.0, query_rows=pads)):
            lm.model(**inputs)
    blind = torch.zeros(2, T, dtype=torch.bool)
    blind[0, 0] = True
    blind[1] = pads[1]
    with pytest.raises(ValueError, match=r"key group 'blind' holds no key that any row of batch row\(s\) \[1\]"):
        with probe(lm, read=Read(query_rows=last, groups={"blind": blind})):
            lm.model(**inputs)
    beyond_group = torch.nn.functional.pad(blind, (0, 1))  # a column beyond the sequence
    with pytest.raises(ValueError, match=rf"key group 'blind' is {T + 1} positions wide, but .* {T} positions"):
        with probe(lm, read=Read(query_rows=last, groups={"blind": beyond_group})):
            lm.model(**inputs)


def test_model_without_the_engine_is_refused():
    lm = wrap_model(tiny_model("qwen3_vl", "sdpa"))
    inputs = tiny_inputs("qwen3_vl", lm.model)
    image = lm.adapter.image_positions(inputs["input_ids"])
    with pytest.raises(RuntimeError, match="runs attention 'sdpa'"):
        with probe(lm, read=Read(query_rows="all", groups={"image": image})):
            pass


@torch.no_grad()
def test_run_head_sets_guards():
    lm = wrap_model(tiny_model("qwen3_vl", ATTENTION))
    inputs = tiny_inputs("qwen3_vl", lm.model)
    image = lm.adapter.image_positions(inputs["input_ids"])
    heads = stack_head_sets(lm.adapter, [[(1, 0)], [(2, 1)], [(0, 3)]])  # [3, L, H]
    with pytest.raises(ValueError, match="the inputs hold 2 items"):
        run_head_sets(lm, inputs, heads, image[:1], HIDE)
    item = _second_row(inputs)
    with pytest.raises(ValueError, match=r"keys must be a bool tensor \[1, \d+\] or \[3, \d+\], got Tensor \(2,"):
        run_head_sets(lm, item, heads, image, HIDE)
    with pytest.raises(ValueError, match="Intervention.keys selects no position in batch row"):
        run_head_sets(lm, item, heads, torch.zeros_like(image[:1]), HIDE)


@pytest.mark.parametrize("bias", [HIDE, 2.5])
@torch.no_grad()
def test_intervention_under_generate_matches_eager_reference(family, bias):
    """Greedy generate under a probe == greedy decoding by full cache-free forwards of the biased eager oracle."""
    name, lm, _, oracle, inputs = family
    T, new = inputs["input_ids"].shape[1], 3
    heads = _head_set(lm, 2)  # [B, L, H]
    keys = torch.nn.functional.pad(_groups(lm, inputs)["image"], (0, new))  # [B, T + new]
    rows = torch.zeros(2, T + new, dtype=torch.bool)
    rows[:, T - 2 :] = True  # the prompt's last two rows and every generated one
    by_layer = {
        layer: (heads[:, candidate], rows, keys, torch.tensor([bias, bias]))
        for candidate, layer in enumerate(lm.adapter.candidate_layers)
    }
    input_ids, expected = inputs["input_ids"], []
    with biased(by_layer):
        for _ in range(new):
            logits = oracle(**_extended(inputs, input_ids)).logits[:, -1]  # [B, V]
            expected.append(logits)
            input_ids = torch.cat([input_ids, logits.argmax(-1, keepdim=True)], 1)
    settings = dict(max_new_tokens=new, do_sample=False, output_logits=True, return_dict_in_generate=True)
    clean = lm.model.generate(**inputs, **settings)
    with probe(lm, intervene=Intervention(heads=heads, keys=keys, bias=bias, query_rows=rows)):
        steered = lm.model.generate(**inputs, **settings)
    torch.testing.assert_close(torch.stack(steered.logits), torch.stack(expected), atol=1e-5, rtol=0)
    assert torch.equal(steered.sequences, input_ids)
    assert (torch.stack(steered.logits) - torch.stack(clean.logits)).abs().max() > 1e-4
