"""The region analyses end to end on tiny random models of the families whose processors tile, pick an any-resolution
grid or keep the native resolution: discovery scores (helpers.measures.discovery.score_strips), CERS steering
onto a grid cell and the grid NCS (helpers.measures.steering.steer_items with a finite bias and with HIDE), on two
items each, through the family's own processor (tests.tiny_models.tiny_processor) and a one-line chat template.
"""

from functools import cache

import numpy as np
import pytest
import torch
from transformers import AutoModelForImageTextToText

from helpers.engine import HIDE, build_batch, wrap_model
from helpers.engine.loading import attn_implementation_for
from helpers.measures import discovery, steering
from helpers.stimuli.corpora import grid_items, load_corpus, strip_items
from tests.tiny_models import REGION_CONFIGS, tiny_processor

FAMILIES = [
    "internvl",  # dynamic tiling: tiles and a thumbnail
    "llava_next",
    "llava_onevision",
    "idefics3",
    "gemma3_pan_and_scan",
    "mistral3",
    "aya_vision",
    "ovis2",
    "lfm2_vl",
    "glm4v",
    "molmo2",  # a low-res view and overlapping high-res crops, pooled
    "paligemma",  # a fixed grid; the processor inserts <bos> after the image and a newline at the end
    "qwen3_vl_moe",
]
TEMPLATE = (  # text before the image, as in real chat templates: a row in the image always sees a key left unhidden
    "User: {% for message in messages %}{% for part in message['content'] %}{% if part['type'] == 'image' %}IMAGE"
    "{% else %} {{ part['text'] }}{% endif %}{% endfor %}{% endfor %}"
    "{% if add_generation_prompt %} Answer: {% endif %}"
)
SEED = 5


@cache
def _lm(family: str):
    config = REGION_CONFIGS[family]()
    torch.manual_seed(0)
    model = AutoModelForImageTextToText.from_config(config, attn_implementation=attn_implementation_for(config))
    processor = tiny_processor(family)
    processor.chat_template = TEMPLATE.replace("IMAGE", processor.image_token)
    return wrap_model(model, processor, name=family)


@pytest.fixture
def reference_answers(monkeypatch):
    """A random model cannot answer; teacher-force the items' own answers as its 'greedy' answers."""
    monkeypatch.setattr(discovery, "greedy_answers", lambda model, processor, items: [i.answer for i in items])


@pytest.mark.parametrize("family", FAMILIES)
def test_discovery_scores_run(family, reference_answers):
    lm = _lm(family)
    items = strip_items(load_corpus("co"), 2, seed=SEED, query="ord")
    batch = build_batch(lm.processor, items, answers=[i.answer for i in items])
    assert torch.equal(batch.image_mask, lm.adapter.image_positions(batch.inputs["input_ids"]))
    panel = discovery.target_panel_keys(lm, batch)  # [B, T]
    assert (panel.sum(1) > 0).all() and not (panel & ~batch.image_mask).any()
    image_ends = [int(row.nonzero().max()) for row in batch.image_mask]
    assert all(int(row.nonzero().min()) > end for row, end in zip(batch.query_mask, image_ends))  # after the image
    out = discovery.score_strips(lm, items)
    shape = (len(items), len(lm.adapter.candidate_layers), lm.adapter.n_heads)
    for source in discovery.source_rows(batch):
        for name in (f"{source}_raw_mean", f"{source}_share_max"):
            assert out[name].shape == shape and np.isfinite(out[name]).all(), name
    raw, share = out["qsp_raw_mean"], out["qsp_share_mean"]  # a sliding-window layer may not see the image: 0
    assert (raw >= 0).all() and raw.max() > 0 and (share <= 1 + 1e-5).all()


@pytest.mark.parametrize("family", FAMILIES)
def test_cers_and_grid_ncs_run(family):
    lm = _lm(family)
    items = grid_items(load_corpus("co"), 2, SEED)
    distractors = steering.distractor_cells(items, SEED)
    for item, d in zip(items, distractors):
        batch = build_batch(lm.processor, [item])
        target, distractor = (steering.cell_keys(lm, batch, item, cell)[0] for cell in (item.correct, int(d)))
        assert target.any() and distractor.any() and not torch.equal(target, distractor)
    head_sets = np.zeros((2, len(lm.adapter.candidate_layers), lm.adapter.n_heads), dtype=bool)  # none, all
    head_sets[1] = True
    for bias, score in ((2.5, steering.cers), (HIDE, steering.ncs_grid)):
        run = steering.steer_items(lm, items, distractors, head_sets, bias)
        scores = score(run)  # [N, 2]
        assert scores.shape == (len(items), 2) and np.isfinite(scores).all()
        assert np.abs(scores[:, 0]).max() < 1e-5  # the empty head-set changes nothing
        assert np.allclose(run["p_to_c"][:, 0], run["p_clean"], atol=1e-5)
        assert np.abs(scores[:, 1]).max() > 0  # steering every head onto a cell moves the answer
