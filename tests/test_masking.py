"""The maskings of helpers.engine.masking against an eager oracle that does each one by hand (tests/oracle.py), on
tiny random models of four families (Qwen3-VL; Gemma 3 with its sliding window; LLaVA; Qwen3.5, whose candidates
are only some layers; every one with grouped key-value heads: 4 query heads on 2), on both attention paths, and
the leak of "leaky_uniform"."""

import pytest
import torch

from helpers.engine import (
    HIDE,
    MASKINGS,
    Intervention,
    attention,
    build_batch,
    head_sets,
    leak,
    load_model,
    probe,
    run_head_sets,
    stack_head_sets,
    wrap_model,
)
from helpers.engine.head_sets import _from_prefix
from helpers.engine.masking import KEYED
from helpers.engine.mcq import letter_probs_from_logits, letter_probs_under, option_token_ids
from helpers.stimuli.corpora import grid_items, load_corpus
from tests.oracle import MASKING_ORACLE, masked
from tests.tiny_models import tiny_inputs, tiny_model

FAMILIES = ["qwen3_vl", "gemma3", "llava", "qwen3_5"]
TOLERANCE = 1e-5  # max abs logit error against the oracle


@pytest.fixture(scope="module", params=FAMILIES)
def family(request):
    name = request.param
    lm = wrap_model(_tiny(name, attention.ATTENTION))
    oracle = _tiny(name, MASKING_ORACLE)
    inputs = tiny_inputs(name, lm.model)  # two left-padded batch rows
    item = {k: v[1:] if v.shape[0] == 2 else v[v.shape[0] // 2 :] for k, v in inputs.items()}  # batch row 1
    real = item["attention_mask"][0].bool()
    item = {k: v[:, real] if v.shape == real[None].shape else v for k, v in item.items()}  # its pads dropped
    return name, lm, oracle, inputs, item


def _tiny(name: str, attn: str):
    """tiny_model, with Gemma 3's image projection drawn at random: it starts at 0, so every image would embed as
    zeros and no row could depend on the image (the leak test looks for that dependence)."""
    model = tiny_model(name, attn)
    if name == "gemma3":
        weight = model.model.multi_modal_projector.mm_input_projection_weight
        torch.nn.init.normal_(weight, std=0.2, generator=torch.Generator().manual_seed(0))
    return model


@pytest.fixture(params=["small", "sdpa"])
def path(request, monkeypatch):
    """The engine's two attention paths: fp32 matmuls on the CPU (up to SMALL_KEYS keys), or sdpa with the chosen
    pairs recomputed."""
    if request.param == "sdpa":
        monkeypatch.setattr(attention, "SMALL_KEYS", 0)
    return request.param


def _oracle_logits(lm, oracle, inputs, heads, rows, keys, masking, factor):
    """The oracle's logits [B, T, V] with the masking done by hand at every candidate layer."""
    width = inputs["input_ids"].shape[1]
    batch = heads.shape[0]
    rows = torch.ones(batch, width, dtype=torch.bool) if isinstance(rows, str) else rows.expand(batch, -1)
    keys = keys.expand(batch, -1)
    factor = torch.as_tensor(factor, dtype=torch.float32).expand(batch)
    by_layer = {
        layer: (masking, heads[:, candidate], rows, keys, factor)
        for candidate, layer in enumerate(lm.adapter.candidate_layers)
    }
    with masked(by_layer):
        return oracle(**inputs).logits


def _image(lm, inputs) -> torch.Tensor:
    return lm.adapter.image_positions(inputs["input_ids"])  # [B, T]


@pytest.mark.parametrize("rows_at", ["all", "last 3"])
@pytest.mark.parametrize("masking", MASKINGS)
@torch.no_grad()
def test_each_masking_matches_its_oracle(family, path, masking, rows_at):
    """A probe on a left-padded batch of two, each batch row its own head-set (rescale: its own factor) == the oracle;
    the real rows before the first chosen one are bit-identical to the clean forward's."""
    name, lm, oracle, inputs, _ = family
    T, L = inputs["input_ids"].shape[1], len(lm.adapter.candidate_layers)
    heads = stack_head_sets(lm.adapter, [[(1, 0), (1, 3)], [(0, 2), (L - 1, 1), (L - 1, 2)]])  # [2, L, H]
    keys = _image(lm, inputs)
    rows = "all"
    if rows_at == "last 3":
        rows = torch.zeros(2, T, dtype=torch.bool)
        rows[:, T - 3 :] = True
    factor = torch.tensor([0.0, 0.5])
    spec = Intervention(heads=heads, keys=keys, bias=HIDE, query_rows=rows, masking=masking, factor=factor)
    clean = lm.model(**inputs).logits
    with probe(lm, intervene=spec):
        masked = lm.model(**inputs).logits
    expected = _oracle_logits(lm, oracle, inputs, heads, rows, keys, masking, factor)
    error = float((masked - expected).abs().max())
    assert error < TOLERANCE, f"{name} {masking} ({path} path, rows {rows_at}): max abs logit error {error:.2e}"
    assert (masked - clean).abs().max() > 1e-4, f"{name} {masking}: no effect"
    if rows_at == "last 3":  # rows before the chosen ones: untouched by every masking, the leaky one too
        before = inputs["attention_mask"].bool() & (torch.arange(T) < T - 3)
        assert torch.equal(masked[before], clean[before]), f"{name} {masking}: rows before the chosen ones changed"


@pytest.mark.parametrize("rows_at", ["all", "from the image"])
@pytest.mark.parametrize("masking", MASKINGS)
@torch.no_grad()
def test_run_head_sets_under_each_masking_equals_the_oracle(family, monkeypatch, masking, rows_at):
    """Four head-sets of one item in forwards of 3 and 1 copies (rescale: a factor per copy), one kept logit: each
    copy == the oracle. The copies continue the clean rows before the first row any copy changes: the first image
    token for every masking at rows from the image, and for the keyed ones (hide, rescale) at rows "all" (the
    rows before the first image key cannot see it); the others change every row at rows "all": whole copies."""
    name, lm, oracle, _, item = family
    L, H = len(lm.adapter.candidate_layers), lm.adapter.n_heads
    sets = [[(0, 1), (L - 1, 3)], [(1, 0), (L - 1, 2)], [], [(l, h) for l in range(L) for h in range(1, H, 2)]]
    heads = stack_head_sets(lm.adapter, sets)  # [4, L, H]
    keys = _image(lm, item)  # [1, T]
    T, first = keys.shape[1], int(keys[0].nonzero()[0])
    rows = "all"
    if rows_at == "from the image":
        rows = torch.zeros_like(keys)
        rows[:, first:] = True
    factors = torch.tensor([0.0, 0.5, 0.0, 2.0])
    seen = []
    monkeypatch.setattr(head_sets, "_from_prefix", lambda *a: seen.append(a[-2]) or _from_prefix(*a))
    head_sets.remember_item(lm, item)
    fast = run_head_sets(
        lm, item, heads, keys, HIDE, rows, logits_to_keep=1, max_tokens=3 * T, masking=masking, factor=factors
    )  # [4, 1, V]
    unchanged_before_image = rows_at == "from the image" or masking in KEYED
    assert seen == ([first] if unchanged_before_image and lm.adapter.continues_from_cache else [])
    errors = []
    for i in range(len(sets)):
        expected = _oracle_logits(lm, oracle, item, heads[i : i + 1], rows, keys, masking, factors[i])
        errors.append(float((fast[i : i + 1] - expected[:, -1:]).abs().max()))
    assert max(errors) < TOLERANCE, f"{name} {masking} (rows {rows_at}): max abs logit errors {errors}"
    assert (fast[0] - fast[2]).abs().max() > 1e-5


@pytest.mark.parametrize("masking", MASKINGS)
@torch.no_grad()
def test_only_the_leaky_masking_lets_the_rows_before_the_image_read_it(family, path, masking):
    """leak(): at the rows before the first image token, only leaky_uniform makes the logits depend on the image
    (``from_image`` > 0) and puts attention on later positions; every other masking leaves them exactly
    independent of it. At rows from the image on, no masking changes the rows before it (the leaky one neither:
    its chosen rows read later rows, not the earlier ones); at rows "all", hide and rescale of the image keys
    leave them as they are (they cannot see those keys), while the unkeyed maskings intervene there."""
    name, lm, _, _, item = family
    heads = stack_head_sets(lm.adapter, [[(0, 1), (1, 2), (1, 3)]])[0]  # [L, H]
    image = _image(lm, item)
    T, first = image.shape[1], int(image[0].nonzero()[0])
    everywhere = leak(lm, item, heads, masking, query_rows="all")
    from_image = torch.zeros_like(image)
    from_image[:, first:] = True
    after = leak(lm, item, heads, masking, query_rows=from_image)
    report = f"{name} {masking} ({path} path): rows all {everywhere}, rows from the image {after}"
    assert after.logits == 0 and after.hidden == 0 and after.from_image == 0, report
    if masking == "leaky_uniform":
        assert everywhere.logits > 0 and everywhere.hidden > 0 and everywhere.from_image > 0, report
        assert everywhere.future_mass_per_row == pytest.approx(0.5 - 1 / (2 * T)), report
    else:
        assert everywhere.from_image == 0 and everywhere.future_mass == 0, report
        assert (everywhere.logits == 0) == (masking in KEYED), report


@pytest.mark.parametrize("masking", [m for m in MASKINGS if m != "leaky_uniform"])
@torch.no_grad()
def test_generate_under_each_causal_masking_equals_the_oracle(family, masking):
    """Greedy generate under a probe (the prompt's last two rows and every generated one) == the oracle's full
    forward over the generated sequence. Not leaky_uniform: its decode steps have no future to read, unlike a full
    forward's rows, so no full forward reproduces them."""
    name, lm, oracle, inputs, _ = family
    T, new = inputs["input_ids"].shape[1], 3
    heads = stack_head_sets(lm.adapter, [[(1, 0), (1, 3)], [(0, 2), (len(lm.adapter.candidate_layers) - 1, 1)]])
    keys = torch.nn.functional.pad(_image(lm, inputs), (0, new))  # [2, T + new]
    rows = torch.zeros(2, T + new, dtype=torch.bool)
    rows[:, T - 2 :] = True
    spec = Intervention(heads=heads, keys=keys, bias=HIDE, query_rows=rows, masking=masking, factor=0.3)
    settings = dict(max_new_tokens=new, do_sample=False, output_logits=True, return_dict_in_generate=True)
    with probe(lm, intervene=spec):
        generated = lm.model.generate(**inputs, **settings)
    full = dict(inputs, input_ids=generated.sequences)
    for field, tail in (("attention_mask", 1), ("mm_token_type_ids", 0), ("token_type_ids", 0)):
        if field in inputs:
            full[field] = torch.cat([inputs[field], torch.full((2, new), tail, dtype=inputs[field].dtype)], 1)
    expected = _oracle_logits(lm, oracle, full, heads, rows, keys, masking, 0.3)[:, T - 1 : T - 1 + new]
    error = float((torch.stack(generated.logits, 1) - expected).abs().max())
    assert error < TOLERANCE, f"{name} {masking} (generate): max abs logit error {error:.2e}"


@torch.no_grad()
def test_guards_name_the_masking_and_its_arguments(family):
    """An unknown masking, a bias other than HIDE, a bad factor or missing keys of a keyed masking: a ValueError
    that names them."""
    name, lm, _, inputs, item = family
    heads = stack_head_sets(lm.adapter, [[(1, 0)], [(1, 1)]])
    image = _image(lm, inputs)
    for spec, message in [
        (dict(masking="zero_heads"), r"masking 'zero_heads' is not one of \('hide', 'query_zero', 'output_zero'"),
        (dict(masking="query_zero", bias=2.0), "masking 'query_zero' masks without a bias: pass bias=HIDE"),
        (dict(masking="rescale", factor=-1.0), "Intervention.factor must be a float or a \\[2\\] tensor"),
        (dict(masking="rescale", factor=torch.ones(3)), "Intervention.factor must be a float or a \\[2\\] tensor"),
        (dict(masking="rescale", keys=None), "Intervention.keys must be a bool tensor"),
    ]:
        arguments = dict(heads=heads, keys=image, bias=HIDE) | spec
        with pytest.raises(ValueError, match=message):
            with probe(lm, intervene=Intervention(**arguments)):
                lm.model(**inputs)
    with pytest.raises(ValueError, match=r"masking 'zero' is not one of"):
        run_head_sets(lm, item, heads[:1], _image(lm, item), HIDE, masking="zero")
    with probe(lm, intervene=Intervention(heads=heads, keys=None, bias=HIDE, masking="output_zero")):
        lm.model(**inputs)  # the unkeyed maskings need no keys


@pytest.fixture(scope="module")
def toy():
    return load_model("toy")


@pytest.mark.parametrize("masking", MASKINGS)
@torch.no_grad()
def test_letter_probs_under_each_masking_on_the_toy_model(toy, masking):
    """letter_probs_under on the shipped toy: sets in one forward == one per forward == one probe per set (the
    empty set: the clean probabilities)."""
    lm = toy
    item = grid_items(load_corpus("co"), 1, 5)[0]
    batch = build_batch(lm.processor, [item])
    L, H = len(lm.adapter.candidate_layers), lm.adapter.n_heads
    heads = stack_head_sets(
        lm.adapter, [[], [(0, 1), (L - 1, 2)], [(l, h) for l in range(L // 2, L) for h in range(H)]]
    )
    keys = batch.image_mask
    together = letter_probs_under(lm, batch, heads, keys, HIDE, masking=masking, factor=0.25)
    one_by_one = letter_probs_under(lm, batch, heads, keys, HIDE, sets_per_forward=1, masking=masking, factor=0.25)
    letters = option_token_ids(lm.processor.tokenizer)
    for i in range(heads.shape[0]):
        spec = Intervention(heads=heads[i : i + 1], keys=keys, bias=HIDE, masking=masking, factor=0.25)
        with probe(lm, intervene=spec):
            alone = letter_probs_from_logits(lm.model(**batch.inputs).logits[:, -1], letters)
        torch.testing.assert_close(together[i : i + 1].log(), alone.log(), atol=1e-4, rtol=0)
    torch.testing.assert_close(together.log(), one_by_one.log(), atol=1e-4, rtol=0)
    change = float(together[1:].log().sub(together[0].log()).abs().max())  # the toy answers with P > 0.999
    assert change > 1e-2, f"{masking}: log P changes by only {change:.1e} on the toy"
