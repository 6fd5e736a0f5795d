"""Discovery scores vs. the eager attention oracle, on a random-weight model of the toy architecture."""

import numpy as np
import pytest
import torch
from transformers import AutoModelForImageTextToText, Qwen3VLForConditionalGeneration

from helpers.engine import build_batch, load_model
from helpers.measures import discovery
from helpers.stimuli.corpora import load_corpus, strip_items
from helpers.storage.cache import ResultCache
from helpers.toy.build import build_config, build_processor


@pytest.fixture(scope="module")
def random_toy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("random_toy")
    torch.manual_seed(0)
    processor = build_processor()
    Qwen3VLForConditionalGeneration(build_config(processor.tokenizer)).save_pretrained(folder)
    processor.save_pretrained(folder)
    eager = AutoModelForImageTextToText.from_pretrained(folder, attn_implementation="eager").eval()
    return load_model(str(folder)), eager


@pytest.fixture
def reference_answers(monkeypatch):
    """A random model cannot answer; teacher-force the items' own answers as its 'greedy' answers."""
    monkeypatch.setattr(discovery, "greedy_answers", lambda model, processor, items: [i.answer for i in items])


@pytest.mark.parametrize("query", ["ord", "ref"])
def test_scores_match_eager_attention(random_toy, reference_answers, query):
    lm, eager = random_toy
    items = strip_items(load_corpus("co"), 3, seed=4, query=query)
    out = discovery.score_strips(lm, items)
    batch = build_batch(lm.processor, items, answers=[i.answer for i in items])
    with torch.no_grad():
        attentions = eager(**batch.inputs, output_attentions=True).attentions  # L x [B, H, T, T]
    attn = torch.stack(attentions, 1)  # [B, L, H, T, T]
    panel = discovery.target_panel_keys(lm, batch)  # [B, T]
    for source, rows in discovery.source_rows(batch).items():
        for b in range(len(items)):
            to_panel = attn[b][:, :, rows[b]][..., panel[b]].sum(-1)  # [L, H, rows]
            to_image = attn[b][:, :, rows[b]][..., batch.image_mask[b]].sum(-1)
            np.testing.assert_allclose(out[f"{source}_raw_mean"][b], to_panel.mean(-1), atol=1e-5)
            np.testing.assert_allclose(out[f"{source}_raw_max"][b], to_panel.amax(-1), atol=1e-5)
            np.testing.assert_allclose(out[f"{source}_share_mean"][b], (to_panel / to_image).mean(-1), atol=1e-4)
    assert panel.sum(1).tolist() == [1, 1, 1]  # a 64-px panel is one merged image token (4x4 merge)
    assert out["answer_tokens"].min() >= 1


def test_discover_caches_per_chunk(random_toy, reference_answers, tmp_path, monkeypatch):
    lm, _ = random_toy
    cache = ResultCache(tmp_path)
    first = discovery.discover(lm, "cm", "ord", n_strips=3, seed=1, cache=cache, strips_per_forward=2)
    calls = []
    monkeypatch.setattr(discovery, "score_strips", lambda *a: calls.append(1))
    again = discovery.discover(lm, "cm", "ord", n_strips=3, seed=1, cache=cache, strips_per_forward=2)
    assert calls == [] and np.array_equal(first["qsp_raw_mean"], again["qsp_raw_mean"])
    assert first["qsp_raw_mean"].shape == (3, 8, 16)
    assert discovery.setting_scores(first, "cm-ord-qsp").shape == (3, 8, 16)
    with pytest.raises(ValueError, match="key_agg='sum'.*'raw', 'share'"):
        discovery.setting_scores(first, "cm-ord-qsp", key_agg="sum")
