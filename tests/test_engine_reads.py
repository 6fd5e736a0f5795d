"""The engine's reads for the published methods, against hand-written eager references on tiny random models:
whole attention rows and top-1 keys (helpers.engine.top_key), head-output zeroing (helpers.engine.head_zeroing) and
head-output gradients / attribution patching (helpers.engine.head_grads)."""

import pytest
import torch

from helpers.engine import ATTENTION, wrap_model
from helpers.engine.head_grads import head_attributions, head_output_gradients
from helpers.engine.head_zeroing import zero_head_outputs
from helpers.engine.top_key import attention_rows, top_keys
from tests.tiny_models import tiny_inputs, tiny_model

FAMILIES = ["qwen3_vl", "llava"]  # a hand-written adapter with a region grid, and one of another layout


@pytest.fixture(scope="module", params=FAMILIES)
def family(request):
    name = request.param
    lm = wrap_model(tiny_model(name, ATTENTION))
    eager = tiny_model(name, "eager")
    inputs = tiny_inputs(name, lm.model, lengths=(5,))  # one item (batch 1)
    return name, lm, eager, inputs


def _row_selection(length: int, positions) -> torch.Tensor:
    rows = torch.zeros(length, dtype=torch.bool)
    rows[list(positions)] = True
    return rows


@torch.no_grad()
def test_attention_rows_and_top_keys_match_eager(family):
    name, lm, eager, inputs = family
    T = inputs["input_ids"].shape[1]
    attentions = torch.stack(eager(**inputs, output_attentions=True).attentions, 1)[0]  # [L, H, T, T]
    rows = _row_selection(T, [T - 6, T - 2, T - 1])
    att = attention_rows(lm, inputs, rows)
    assert att.row_positions.tolist() == [T - 6, T - 2, T - 1]
    assert att.keys.tolist() == list(range(T))  # every key the last row sees
    torch.testing.assert_close(att.weights, attentions[:, :, rows][..., :T], atol=1e-5, rtol=0)
    expected = attentions[:, :, rows].argmax(-1)  # [L, H, R]
    assert torch.equal(top_keys(lm, inputs, rows), expected)

    image = lm.adapter.image_positions(inputs["input_ids"])[0]
    restricted = attention_rows(lm, inputs, rows, keys=image)
    torch.testing.assert_close(restricted.weights, attentions[:, :, rows][..., image], atol=1e-5, rtol=0)
    positions = top_keys(lm, inputs, rows, keys=image)
    assert image[positions].all()  # the top-1 key among the image tokens is an image token
    assert torch.equal(positions, image.nonzero().flatten()[attentions[:, :, rows][..., image].argmax(-1)])


@torch.no_grad()
def test_attention_rows_refusals(family):
    name, lm, _, inputs = family
    T = inputs["input_ids"].shape[1]
    rows = _row_selection(T, [T - 3])
    with pytest.raises(ValueError, match="batch 1"):
        attention_rows(lm, {k: torch.cat([v, v]) for k, v in inputs.items()}, rows)
    with pytest.raises(ValueError, match="selects no position"):
        attention_rows(lm, inputs, torch.zeros(T, dtype=torch.bool))
    with pytest.raises(ValueError, match="after every chosen row"):  # key T - 1 is in row T - 3's future
        attention_rows(lm, inputs, rows, keys=_row_selection(T, [T - 1]))


def _eager_with_heads_scaled(eager, lm, heads: dict, factor: float):
    """A copy of the eager model whose o_proj columns of the given {candidate layer: [head, ...]} are scaled."""
    import copy

    scaled = copy.deepcopy(eager)
    D = lm.adapter.head_dim
    layers = scaled.model.language_model.layers
    for candidate, head_list in heads.items():
        o_proj = layers[lm.adapter.candidate_layers[candidate]].self_attn.o_proj
        for h in head_list:
            o_proj.weight.data[:, h * D : (h + 1) * D] *= factor
    return scaled


@torch.no_grad()
def test_zeroed_heads_match_eager_with_zeroed_o_proj_columns(family):
    name, lm, eager, inputs = family
    n_layers, n_heads = len(lm.adapter.candidate_layers), lm.adapter.n_heads
    heads = torch.zeros(3, n_layers, n_heads, dtype=torch.bool)
    heads[0, 0, 1] = True
    heads[1, 1, 0] = heads[1, 2, 3] = True  # row 2: nothing zeroed
    batch = {k: v.repeat(3, *[1] * (v.ndim - 1)) for k, v in inputs.items()}
    with zero_head_outputs(lm, heads):
        logits = lm.model(**batch).logits
    expected = [
        _eager_with_heads_scaled(eager, lm, {0: [1]}, 0.0)(**inputs).logits,
        _eager_with_heads_scaled(eager, lm, {1: [0], 2: [3]}, 0.0)(**inputs).logits,
        eager(**inputs).logits,
    ]
    for b in range(3):
        torch.testing.assert_close(logits[b], expected[b][0], atol=1e-5, rtol=0)
    assert not torch.allclose(logits[0], logits[2], atol=1e-4)
    with pytest.raises(ValueError, match="heads has shape"):
        with zero_head_outputs(lm, heads[:, :1]):
            pass


def _objective(logits: torch.Tensor) -> torch.Tensor:
    """A smooth scalar per batch row: log-probability of token 7 at the last position."""
    return logits[:, -1].float().log_softmax(-1)[:, 7]


def test_head_gradients_match_central_differences_of_the_eager_model(family):
    """grad . output of head (l, h) == d/de objective(head output scaled by 1 + e) at e = 0, the latter by central
    differences on the eager model with that head's o_proj columns scaled."""
    name, lm, eager, inputs = family
    attributions, value = head_attributions(lm, inputs, _objective)
    with torch.no_grad():
        torch.testing.assert_close(value, _objective(eager(**inputs).logits), atol=1e-5, rtol=0)
    eps = 1e-2
    for layer, head in [(0, 0), (1, 2), (2, 3)]:
        with torch.no_grad():
            up = _objective(_eager_with_heads_scaled(eager, lm, {layer: [head]}, 1 + eps)(**inputs).logits)
            down = _objective(_eager_with_heads_scaled(eager, lm, {layer: [head]}, 1 - eps)(**inputs).logits)
        derivative = (up - down) / (2 * eps)
        torch.testing.assert_close(attributions[0, layer, head], derivative[0], atol=2e-4, rtol=1e-3)


def test_head_gradients_leave_the_model_as_it_was(family):
    name, lm, _, inputs = family
    flags = [p.requires_grad for p in lm.model.parameters()]
    result = head_output_gradients(lm, inputs, _objective)
    assert [p.requires_grad for p in lm.model.parameters()] == flags
    assert all(p.grad is None for p in lm.model.parameters())
    assert len(result.grads) == len(lm.adapter.candidate_layers)
    assert result.grads[0].shape == (1, inputs["input_ids"].shape[1], lm.adapter.n_heads, lm.adapter.head_dim)
    later = torch.zeros(1, inputs["input_ids"].shape[1], dtype=torch.bool)
    later[0, -1] = True  # only the last position: a part of the whole sum
    whole, part = result.attributions(), result.attributions(later)
    assert whole.shape == part.shape == (1, len(lm.adapter.candidate_layers), lm.adapter.n_heads)
    assert not torch.allclose(whole, part)
