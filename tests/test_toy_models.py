"""The further embedded toys (helpers/toy/models/): saved folders that load through the Auto classes, model
cards that state the held-out accuracies, region maps that cover every image token, and the engine against
the eager oracle on real items."""

import json

import pytest
import torch
from transformers import AutoModelForImageTextToText, AutoProcessor

from helpers.engine import HIDE, Intervention, load_model, probe, stack_head_sets
from helpers.engine.inputs import build_batch
from helpers.stimuli.corpora import SyntheticCorpus
from helpers.storage import paths
from helpers.toy.build import build_processor
from helpers.toy.evaluate import THRESHOLDS
from helpers.toy.tasks import build_task_items
from tests.oracle import ORACLE, biased

TOYS = {  # name -> family
    "toy-qwen2vl": "qwen2_vl",
    "toy-llava": "llava",
    "toy-qwen3vl-seed1": "qwen3_vl",
    "toy-qwen3vl-drophead": "qwen3_vl",
    "toy-modular": "qwen3_vl",
    "toy-qwen2vl-graded": "qwen2_vl",
    "toy-depth-nowords-nodh": "qwen3_vl",
    "toy-saturated-layer0": "qwen3_vl",
}


@pytest.fixture(scope="module", params=sorted(TOYS))
def toy(request):
    return request.param, paths.toy_folder(request.param)


def test_folder_is_small_and_loads_through_the_auto_classes(toy):
    name, folder = toy
    assert (folder / "model.safetensors").stat().st_size < 20e6
    model = AutoModelForImageTextToText.from_pretrained(folder)
    processor = AutoProcessor.from_pretrained(folder)
    assert model.config.model_type == TOYS[name]
    assert type(processor).__name__ == type(build_processor(TOYS[name])).__name__
    lm = load_model(name)
    assert lm.adapter.family == TOYS[name] and lm.name == name


def test_model_card_states_every_held_out_accuracy(toy):
    _, folder = toy
    card = (folder / "README.md").read_text()
    results = json.loads((folder / "heldout_accuracy.json").read_text())["results"]
    assert set(results) == set(THRESHOLDS)
    for result in results.values():
        assert f"{result['value']:.3f} ({result['cm']:.2f} / {result['co']:.2f})" in card
    missed = sum(not r["passes"] for r in results.values())
    assert ("All eight targets are met." in card) == (missed == 0)
    assert (f"misses {missed} of the eight targets" in card) == (missed > 0)


def test_model_card_states_the_pointing_audit_and_whether_the_tasks_were_trained(toy):
    _, folder = toy
    card = (folder / "README.md").read_text()
    summary = json.loads((folder / "heldout_accuracy.json").read_text())
    audits = summary["pointing"]
    for task, row in audits.items():
        assert f"| {task} | {row['plain accuracy']:.3f} | {row['oracle']:.3f} | {row['matched']:.3f} |" in card
    assert f"{sum(r['passes'] for r in audits.values())} of 5 pointing tasks pass" in card
    assert ("measured after" in card) == (not summary.get("pointing_in_curriculum", True))


def test_regions_partition_the_image_tokens(toy):
    name, _ = toy
    lm = load_model(name)
    for kind, n_regions in (("strip_ord", 6), ("grid", 4)):
        item = build_task_items(kind, SyntheticCorpus("cm"), 1, 5)[0]
        batch = build_batch(lm.processor, [item])
        masks = torch.stack(
            [lm.adapter.region_mask(batch.inputs, box, item.image.size) for box in item.boxes.values()]
        )  # [regions, T]
        assert masks.shape[0] == n_regions
        assert torch.equal(masks.sum(0), batch.image_mask[0].long())  # every image token in exactly one region


@pytest.mark.parametrize("bias", [HIDE, 2.5])
@torch.no_grad()
def test_engine_matches_the_eager_oracle_on_real_items(toy, bias):
    name, folder = toy
    lm = load_model(name)
    oracle = AutoModelForImageTextToText.from_pretrained(folder, attn_implementation={"text_config": ORACLE}).eval()
    items = build_task_items("grid", SyntheticCorpus("co"), 2, 9)
    batch = build_batch(lm.processor, items)
    inputs, T = batch.inputs, batch.inputs["input_ids"].shape[1]
    keys = torch.stack(
        [lm.adapter.region_mask(inputs, item.boxes["A"], item.image.size, b) for b, item in enumerate(items)]
    )  # [B, T]: cell A's tokens
    heads = stack_head_sets(lm.adapter, [[(1, 0), (2, 3)], [(0, 1), (len(lm.adapter.candidate_layers) - 1, 2)]])
    rows = torch.zeros(2, T, dtype=torch.bool)
    rows[:, T - 4 :] = True
    by_layer = {
        layer: (heads[:, candidate], rows, keys, torch.tensor([bias, bias]))
        for candidate, layer in enumerate(lm.adapter.candidate_layers)
    }
    with biased(by_layer):
        expected = oracle(**inputs).logits
    with probe(lm, intervene=Intervention(heads=heads, keys=keys, bias=bias, query_rows=rows)):
        steered = lm.model(**inputs).logits
    torch.testing.assert_close(steered, expected, atol=1e-5, rtol=0)
    assert (steered - lm.model(**inputs).logits).abs().max() > 1e-5  # the intervention took effect
