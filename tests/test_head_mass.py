"""Attention masses per head on evaluation items, their set statistics, and the text-masked arm."""

import numpy as np
import pytest

from helpers.engine import build_batch, load_model
from helpers.measures import head_mass, necessity
from helpers.stimuli.corpora import grid_items, load_corpus, single_image_items
from helpers.storage.cache import ResultCache


@pytest.fixture(scope="module")
def lm(two_threads):
    return load_model("toy")


def test_masses_are_shares_of_attention_and_match_an_item_by_item_read(lm):
    items = grid_items(load_corpus("co"), 3, 2)
    together = head_mass.item_masses(lm, items, "prompt")  # left-padded batch of 3
    alone = head_mass.item_masses(lm, items[1:2], "prompt")
    n_layers, n_heads = len(lm.adapter.candidate_layers), lm.adapter.n_heads
    for name in head_mass.GROUPS:
        assert together[name].shape == (3, n_layers, n_heads)
        assert np.allclose(together[name][1], alone[name][0], atol=1e-5)  # padding changes nothing
    total = together["image"] + together["text"] + together["first"]
    assert (total <= 1 + 1e-5).all() and (together["image"] >= 0).all()
    # some heads look at each group (the default toy's strongest first-token head takes 0.28)
    assert together["image"].max() > 0.3 and together["first"].max() > 0.2
    batch = build_batch(lm.processor, items)
    groups = head_mass.key_groups(batch)
    assert (groups["first"].sum(1) == 1).all()
    assert not (groups["first"] & batch.inputs["attention_mask"].eq(0)).any()


def test_mass_run_caches_the_item_means(lm, tmp_path, monkeypatch):
    cache = ResultCache(tmp_path)
    first = head_mass.mass_run(lm, "cm", "single_matched", 3, 1, "last", cache, items_per_forward=2)
    monkeypatch.setattr(head_mass, "item_masses", lambda *a, **k: (_ for _ in ()).throw(AssertionError("recomputed")))
    again = head_mass.mass_run(lm, "cm", "single_matched", 3, 1, "last", cache, items_per_forward=2)
    assert all(np.array_equal(first[k], again[k]) for k in head_mass.GROUPS)
    assert first["image"].shape == (len(lm.adapter.candidate_layers), lm.adapter.n_heads)


def test_set_mass_statistics_by_hand():
    mass = np.array([[0.1, 0.2, 0.6], [0.3, 0.0, 0.9]])
    sets = np.array([[[True, True, False], [True, False, False]]])
    row = head_mass.set_mass_statistics(mass, sets).iloc[0]
    assert row["mean"] == pytest.approx(0.2) and row["median"] == pytest.approx(0.2)
    assert (row["min"], row["max"]) == pytest.approx((0.1, 0.3)) and row["SD"] == pytest.approx(
        np.std([0.1, 0.2, 0.3])
    )
    with pytest.raises(ValueError, match="empty"):
        head_mass.set_mass_statistics(mass, np.zeros((1, 2, 3), dtype=bool))


def test_hiding_the_prompt_text_from_every_head_breaks_the_text_arm(lm):
    n_layers, n_heads = len(lm.adapter.candidate_layers), lm.adapter.n_heads
    sets = np.zeros((2, n_layers, n_heads), dtype=bool)
    sets[1] = True
    items = single_image_items(load_corpus("co"), 6, 3, "text")
    run = {f"text_{k}": v for k, v in necessity.mask_items(lm, items, sets, keys="text").items()}
    dropped = necessity.drop(run, "text").mean(0)  # [2]
    assert dropped[0] == pytest.approx(0.0, abs=1e-5) and dropped[1] > 0.5
    with pytest.raises(ValueError, match="keys 'audio'"):
        necessity.hidden_keys(build_batch(lm.processor, items[:1]), "audio")
    with pytest.raises(ValueError, match="arms"):
        necessity.necessity_run(lm, "co", 2, 0, sets, "all", ResultCache("/tmp/unused"), arms=("blank",))
