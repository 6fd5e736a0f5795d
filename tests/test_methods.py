"""The published methods (helpers.measures.methods): known cases on hand-built attention, refusals, and a finite
[L, H] score from every method on the toy."""

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from helpers import sizes
from helpers.engine import load_model
from helpers.engine.top_key import AttentionRows, top_key_positions
from helpers.measures import names
from helpers.measures.imported_head_sets import read_any
from helpers.measures.methods import (
    CAUSAL_REFERENCES,
    FACTS,
    METHODS,
    PER_ITEM,
    REGION_METHODS,
    check_method,
    citation,
    holm_family,
    rank_agreement,
    top1_hits,
)
from helpers.measures.methods.cached import method_items, method_score
from helpers.measures.methods.ceiling import half_split_ceiling, shared_across_halves
from helpers.measures.methods.common import answer_positions, mean_score, one_batch
from helpers.measures.methods.gaze import gaze_from_panel_mass, panel_variants
from helpers.measures.methods.localization import (
    chord_elbow,
    item_votes,
    spatial_entropy,
    value_elbow,
)
from helpers.measures.methods.qrhead import doc_scores, null_item
from helpers.measures.methods.top1_hits import (
    hit_sum,
    longest_common_run,
    rouge1_recall,
    sparsemm_combine,
    sparsemm_steps,
)
from helpers.measures.methods.ver import ver_ratio, ver_score
from helpers.measures.overlap import half_split_overlaps, split_halves
from helpers.measures.stats import holm
from helpers.measures.verdicts import BEATS, holm_floor, holm_random_sets, versus_random
from helpers.runner import params
from helpers.stimuli.corpora import items_of
from helpers.storage import headsets
from helpers.storage.cache import ResultCache
from helpers.studies import findings
from helpers.studies.methods import validation

# ------------------------------------------------------------------------------------------------ known cases


def test_gaze_is_the_diagonal_mean_of_raw_panel_mass():
    mass = np.zeros((2, 3, 1, 2, 3))  # 2 strips, 3 panels, 1 layer, 2 heads
    for p in range(3):
        mass[:, p, 0, 0, p] = 0.6  # head 0 looks at the asked-about panel
        mass[:, p, 0, 1, 0] = 0.9  # head 1 always looks at panel 1
    score = gaze_from_panel_mass(mass)
    np.testing.assert_allclose(score, [[0.6, 0.3]])  # raw, not renormalised: head 1 hits only when panel 1 is asked


def test_gaze_asks_about_every_panel():
    strip = items_of("strip_ord", "cm", 1, 0)[0]
    variants = panel_variants(strip)
    assert [v.target for v in variants] == [f"panel {p}" for p in range(1, 7)]
    assert variants[2].prompt.endswith("What is in panel 3?") and variants[2].image is strip.image


def test_ver_is_the_evidence_share_of_image_attention():
    np.testing.assert_allclose(ver_ratio(np.array([0.2, 0.0]), np.array([0.4, 0.0])), [0.5, 0.0])


def test_spatial_entropy_known_maps():
    one_blob = np.zeros((4, 4))
    one_blob[1:3, 1:3] = 0.2  # one 8-connected component
    assert spatial_entropy(one_blob) == pytest.approx(0.0)
    two = np.zeros((4, 4))
    two[0, 0] = two[3, 3] = 0.4  # two components of equal mass
    assert spatial_entropy(two) == pytest.approx(math.log(2))
    diagonal = np.zeros((4, 4))
    diagonal[0, 0] = diagonal[1, 1] = 0.4  # diagonal neighbours: one component under 8-connectivity
    assert spatial_entropy(diagonal) == pytest.approx(0.0)
    assert spatial_entropy(np.full((3, 3), 0.1)) == math.inf  # nothing above the mean


def test_value_elbow_selects_by_attention_sum_not_by_head_index():
    values = np.array([[0.9, 0.01], [0.02, 0.03], [0.85, 0.04]])  # high sums at flat indices 0 and 4
    assert chord_elbow(values) == 3  # sorted: .01 .02 .03 .04 .85 .9 -> the last low point before the jump
    np.testing.assert_array_equal(value_elbow(values), values >= 0.04)
    # their code would keep heads with flat index >= the elbow head's index (3): indices 3, 4, 5 -> [0.04, .85, .03]
    entropy = np.array([[0.1, 0.0], [0.0, 0.0], [0.5, 0.2]])
    np.testing.assert_array_equal(item_votes(values, entropy, per_item_top=2), [[1, 0], [0, 0], [0, 1]])


def _hand_rows() -> AttentionRows:
    """1 layer x 3 heads, 2 rows, keys at positions 10..13: head 0 looks at 11, head 1 at 13, head 2 at 10/12."""
    weights = torch.zeros(1, 3, 2, 4)
    weights[0, 0, :, 1] = 0.7
    weights[0, 1, :, 3] = 0.6
    weights[0, 2, 0, 0] = weights[0, 2, 1, 2] = 0.5
    return AttentionRows(weights=weights, row_positions=torch.tensor([20, 21]), keys=torch.tensor([10, 11, 12, 13]))


def test_sparsemm_scores_one_over_region_size_at_steps_naming_one_region():
    top = top_key_positions(_hand_rows())
    assert top[0].tolist() == [[11, 11], [13, 13], [10, 12]]
    texts = {"panel 1": "red star", "panel 2": "blue ring"}
    steps = sparsemm_steps([" red", "red", " ", "ring", "r"], texts)
    assert steps == [(1, "panel 1"), (3, "panel 2")]  # " red" is in neither, " " and "r" are in both
    region_1 = torch.zeros(30, dtype=torch.bool)
    region_1[[10, 11]] = True
    region_2 = torch.zeros(30, dtype=torch.bool)
    region_2[[12, 13]] = True
    score = hit_sum(top, [region_1, region_2], [1 / 2, 1 / 2])
    np.testing.assert_allclose(score, [[0.5, 0.5, 1.0]])


def test_ocr_scores_the_answer_recall_on_region_hits():
    assert longest_common_run([5, 6, 7], [1, 5, 6, 9, 7]) == 2
    top = top_key_positions(_hand_rows())
    region = torch.zeros(30, dtype=torch.bool)
    region[[11, 12]] = True
    total = hit_sum(top, [region, region], [2 / 3, 2 / 3])
    np.testing.assert_allclose(total / 2, [[2 / 3, 0.0, 1 / 3]])  # mean over the two entries


def test_retrieval_counts_copies_from_the_span():
    assert rouge1_recall("red star in panel 3", "Red star, panel 3") == pytest.approx(0.8)
    top = top_key_positions(_hand_rows())
    ids = torch.zeros(30, dtype=torch.long)
    ids[[10, 11, 12, 13]] = torch.tensor([4, 8, 4, 9])
    span = torch.zeros(30, dtype=torch.bool)
    span[[11, 12, 13]] = True  # the needle
    generated = [8, 4]  # step 0 copies id 8 (position 11), step 1 copies id 4 (position 12; 10 is outside)
    targets = [span & (ids == t) for t in generated]
    np.testing.assert_allclose(hit_sum(top, targets, [1 / 3, 1 / 3]), [[1 / 3, 0.0, 1 / 3]])


def test_qrhead_calibrated_doc_scores_drop_outlier_tokens():
    calibrated = np.zeros((1, 1, 7))
    calibrated[0, 0, :6] = [0.1, 0.1, 0.1, 0.1, 0.1, -1.0]  # doc 0: the -1.0 is below mean - 2 std
    calibrated[0, 0, 6] = 0.3  # doc 1: one token, kept whole
    scores = doc_scores(calibrated, [np.arange(6), np.array([6])])
    np.testing.assert_allclose(scores, [[[0.5, 0.3]]])
    item = items_of("strip_ord", "cm", 1, 0)[0]
    null = null_item(item)
    assert null.prompt.endswith("What is in N/A?") and null.query_text == "N/A"


def test_a_means_half_split_ceiling_is_notebook_02s():
    score = np.random.default_rng(0).random((10, 4, 5))
    splits = split_halves(10, 7, 0)
    expected = half_split_overlaps(score, score, 6, splits)
    np.testing.assert_array_equal(half_split_ceiling({"score": score}, mean_score, 6, splits), expected)


def test_a_half_without_a_score_leaves_its_split_out_of_the_ceiling():
    """SparseMM's combine averages over answered items: a half with none of them gives no score (NaN split); the
    other split's halves each rank heads by their own answered item."""
    score = np.zeros((4, 1, 3))
    score[0, 0] = [3, 2, 1]  # answered, item 0
    score[1, 0] = [1, 2, 3]  # answered, item 1
    run = {"score": score, "answered": np.array([1, 1, 0, 0]), "named": np.array([1, 1, 0, 0])}
    splits = np.array([[[0, 1], [2, 3]], [[0, 2], [1, 3]]])  # items 0, 1 in one half; then one in each half
    shared = half_split_ceiling(run, sparsemm_combine, 1, splits)
    assert np.isnan(shared[0]) and shared[1] == 0  # top-1: head 0 on item 0's half, head 2 on item 1's
    assert half_split_ceiling(run, sparsemm_combine, 2, splits[1:])[0] == 1  # top-2: {0, 1} and {1, 2}


def test_holm_across_nine_methods_needs_179_random_sets_and_08_defaults_to_them():
    assert holm_random_sets(len(METHODS)) == 179 and holm_floor(179, 9) <= 0.05 < holm_floor(178, 9)
    assert holm_floor(20, 9) == pytest.approx(0.429, abs=5e-4) and holm_random_sets(1) == 19
    assert params.declared_parameters("08_methods")["n_random"] == holm_random_sets(len(METHODS))
    assert sizes.RANDOM_SETS["methods"]["paper"] == sizes.RANDOM_SETS["methods_any_layer"]["paper"] == 179
    assert names.METHOD_NAMES == tuple(METHODS)


def test_rank_agreement():
    assert rank_agreement(np.arange(6.0).reshape(2, 3), np.arange(6.0).reshape(2, 3) ** 2) == pytest.approx(1.0)


def test_rank_agreement_ties_near_zero_drops_instead_of_ranking_float_noise():
    rng = np.random.default_rng(0)
    score = rng.normal(size=(4, 8))
    drops = np.where(rng.random((4, 8)) < 0.75, 0.0, rng.uniform(0.05, 0.3, (4, 8)))  # most heads change nothing
    printed = {f"{rank_agreement(score, drops + rng.normal(0, 1e-7, drops.shape)):.3f}" for _ in range(5)}
    assert len(printed) == 1  # without the tie rule each draw of the noise reorders the zero drops


def test_every_method_has_its_facts():
    assert set(FACTS) == set(METHODS) and set(CAUSAL_REFERENCES) <= set(METHODS)
    for facts in FACTS.values():
        assert all(getattr(facts, field) for field in facts.__dataclass_fields__)


# ------------------------------------------------------------------------------------------------ the toy


@pytest.fixture(scope="module")
def toy():
    return load_model("toy")


class _Captured(Exception):
    pass


def test_ocr_keys_leave_out_the_last_prompt_key_as_their_slice_does(toy, monkeypatch):
    item = list(items_of("strip_ord", "cm", 1, 0))[0]
    seen = {}

    def capture(lm, inputs, rows, keys):
        seen["keys"] = keys
        raise _Captured

    monkeypatch.setattr(top1_hits, "attention_rows", capture)
    with pytest.raises(_Captured):
        top1_hits.ocr_item(toy, item, item.answer)
    first_answer = int(answer_positions(one_batch(toy, item, item.answer))[0])
    keys = seen["keys"]
    # OCR_Head's attn[ans, :-len(generated)]: every prompt key but the last, no answer key
    assert keys[first_answer - 2] and not keys[first_answer - 1] and not keys[first_answer:].any()


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_gives_a_finite_score_on_the_toy(toy, name):
    kind = "strip_ref" if name == "retrieval" else "strip_ord"
    items = list(items_of(kind, "cm", 1 if name in CAUSAL_REFERENCES else 3, 0))
    score = METHODS[name](toy, items)
    shape = (len(toy.adapter.candidate_layers), toy.adapter.n_heads)
    assert score.shape == shape and np.isfinite(score).all()
    assert np.ptp(score) > 0, f"{name} gave every head the same score"


@pytest.mark.parametrize(
    "name, kind, message",
    [
        ("gaze", "grid", "strip items"),
        ("ver", "single_matched", "holds every image token"),
        ("qrhead", "single_matched", "one region"),
        ("sparsemm", "single_matched", "exactly one region"),
        ("retrieval", "grid", "copied from the prompt"),
    ],
)
def test_methods_refuse_items_they_cannot_serve(toy, name, kind, message):
    with pytest.raises(ValueError, match=message):
        METHODS[name](toy, list(items_of(kind, "cm", 2, 0)))


def test_localization_needs_an_image_of_several_tokens(toy):
    """toy-modular gives a single image one token, the default toy 2 x 2: a map only on the second."""
    with pytest.raises(ValueError, match="1 x 1 token"):
        METHODS["localization"](load_model("toy-modular"), list(items_of("single_matched", "cm", 2, 0)))
    score = METHODS["localization"](toy, list(items_of("single_matched", "cm", 2, 0)))
    assert np.isfinite(score).all() and score.max() > 0


def test_region_methods_refuse_a_model_without_region_mapping():
    generic = SimpleNamespace(adapter=SimpleNamespace(maps_regions=False, family="cohere2_vision"))
    with pytest.raises(ValueError, match="maps no pixel region"):
        ver_score(generic, list(items_of("strip_ord", "cm", 1, 0)))


# ------------------------------------------------------------------------------------------------ cached runs


def test_cached_runs_read_back_and_combine_as_the_methods(toy, tmp_path):
    """A cached method's per-item run combines to METHODS' score on the same strips, and a rerun (or a smaller run)
    reads it back without computing; the key follows the method and its parameters."""
    cache = ResultCache(tmp_path)
    items = method_items(8, 0)
    assert [i.kind for i in items[:4]] == ["strip_ord", "strip_ref", "strip_ord", "strip_ref"]
    assert method_items(5, 0) == items[:5]
    for name in ("ver", "ocr", "retrieval"):
        np.testing.assert_allclose(method_score(toy, name, 8, 0, cache, chunk=4), METHODS[name](toy, items))
    entries = sorted((tmp_path / "methods").iterdir())
    assert len(entries) == 6  # 3 methods x 2 chunks
    saved, save = [], cache.save
    cache.save = lambda name, key, arrays, copies=None: saved.append(key["chunk"]) or save(name, key, arrays, copies)
    method_score(toy, "ver", 4, 0, cache, chunk=4)  # the first chunk of the larger run, read back
    assert saved == []
    method_score(toy, "retrieval", 4, 0, cache, chunk=4, min_recall=0.4)  # other parameters: another entry
    assert saved == [[0, 4]] and len(list((tmp_path / "methods").iterdir())) == 7


def test_every_method_states_its_limits_and_an_unknown_one_is_refused():
    assert set(REGION_METHODS) | {"retrieval", *CAUSAL_REFERENCES} == set(METHODS) == set(PER_ITEM)
    for name in REGION_METHODS:
        assert "region" in FACTS[name].needs or "grid" in FACTS[name].needs
    with pytest.raises(ValueError, match="not one of the methods: gaze, ver"):
        check_method("gazer")
    assert citation("gaze").startswith("Gaze heads; rohitgandikota/gaze-heads")


def test_methods_validation_sentence_applies_the_rule_after_holm():
    row = {"kind": "method", "R": 60, "R any-layer": 60, "overlap with co-ref-qsp per 100": 50.0}
    cells = {}
    for measure in ("NCS", "CERS"):
        cells[f"{measure} S"] = 0.2
        for prefix in (measure, f"{measure} any-layer"):
            cells.update({f"{prefix} random": 0.0, f"{prefix} p": 1 / 61, f"{prefix} p Holm": 2 / 61})
    table = pd.DataFrame(
        [
            {"method": "gaze", **row, **cells},
            {"method": "ver", **row, **cells, "NCS S": 0.005, "CERS p Holm": 0.5},
            {"method": "ablation", **row, **cells, "kind": "causal reference"},
            {"method": "ocr", "kind": "refused", "refused": "no entry"},
        ]
    )
    text = findings.methods_validation_sentence(table)
    # the causal reference is its own Holm family: it neither joins nor widens the methods' (floor 2 / 61)
    assert "NCS vs layer-matched (floor 0.033): gaze, ablation (p <= 0.05 with an effect below 0.01: ver)" in text
    assert "CERS vs layer-matched (floor 0.033): gaze, ablation;" in text
    at_r20 = findings.methods_validation_sentence(table.assign(R=20))  # Holm across 2 at R = 20: floor .095
    assert "NCS vs layer-matched (floor 0.095): ablation" in at_r20  # alone in its family: floor 1 / 21
    assert "Refused on this model or these strips: ocr." in text


def test_holm_runs_within_the_published_methods_so_their_floor_at_r_179_lies_below_alpha():
    published = [name for name in METHODS if holm_family(name) == "published methods"]
    assert len(published) == 7 and {holm_family(name) for name in CAUSAL_REFERENCES} == {"causal references"}
    adjusted = holm(np.full(len(published), 1 / 180))  # every method at its rank p's floor at R = 179
    assert adjusted == pytest.approx(7 / 180) and adjusted.max() < 0.05  # not at .05, where one more row flips it
    assert versus_random(adjusted[0], 0.1, 179, len(published)).outcome == BEATS


def test_validation_stats_rank_over_distinct_sets_and_adjust_within_each_holm_family(monkeypatch):
    def per_item(evaluation, measure, sets):  # S 0.2 above random sets at float noise
        values = np.random.default_rng(len(sets)).normal(0, 0.001, (6, len(sets)))
        values[:, 0] += 0.2
        return values

    monkeypatch.setattr(validation, "per_item", per_item)
    evaluation = SimpleNamespace(lm=SimpleNamespace(adapter=SimpleNamespace(candidate_layers=range(2), n_heads=8)))
    head_set = np.zeros((2, 8), dtype=bool)
    head_set[1, :6] = True  # spills 4 heads into layer 0: C(8, 4) = 70 distinct layer-matched sets
    sets = {"gaze": head_set, "ver": head_set, "ablation": head_set}
    stats = validation.validation_stats(evaluation, sets, 6, 100, 100, 0).set_index(["method", "control"])
    matched = stats.xs("layer-matched", level="control")
    assert (matched["R"] == 100).all() and (matched["distinct"] == 70).all() and (matched["p"] == 1 / 71).all()
    assert matched.loc["gaze", "p Holm"].tolist() == [2 / 71] * 2  # the two published methods
    assert matched.loc["ablation", "p Holm"].tolist() == [1 / 71] * 2  # the causal reference alone


def test_holm_reach_sentence_names_the_floor_and_the_r_needed():
    stats = pd.DataFrame(
        {"method": ["gaze", "ver"] * 2, "measure": ["NCS"] * 4, "control": ["layer-matched"] * 2 + ["any-layer"] * 2}
    )
    stats.insert(1, "Holm family", [holm_family(name) for name in stats["method"]])
    text = findings.holm_reach_sentence(stats, {"layer-matched": 20, "any-layer": 60}, holm_random_sets(2))
    assert "NCS vs layer-matched 0.095 (2 published methods, R = 20); NCS vs any-layer 0.033 (2 published" in text
    assert "no method can pass under Holm there (NCS vs layer-matched)" in text and "from R = 39 random sets" in text


def test_methods_ceiling_sentence_compares_each_method_with_its_own_ceiling_across_halves():
    across = pd.DataFrame(
        {"gaze": [3.5, 1.0], "ver": [1.0, 0.5], "co-ref-qsp": [2.0, 1.0], "cm-ref-qsp": [0.0, 0.54]},
        index=["gaze", "ver"],
    )
    ceilings = pd.Series({"gaze": 3.5, "ver": 0.5, "co-ref-qsp": 3.0, "cm-ref-qsp": 2.0})
    text = findings.methods_ceiling_sentence(across, ceilings, 4)
    assert "gaze 3.5 / 2.0 (co-ref-qsp); ver 0.5 / 1.0 (gaze)" in text
    assert "median 2.5 (range 2.0-3.0)" in text and "reaches their own ceiling: ver." in text
    halves = [(np.array([[3.0, 2.0, 1.0]]), np.array([[1.0, 2.0, 3.0]]))] * 2  # one column, two equal splits
    other = [(np.array([[1.0, 2.0, 3.0]]), np.array([[3.0, 2.0, 1.0]]))] * 2
    np.testing.assert_array_equal(shared_across_halves(halves, halves, 1), [0, 0])  # its halves disagree
    np.testing.assert_array_equal(shared_across_halves(halves, other, 1), [1, 1])  # first half vs other's second


def test_methods_damage_sentence_counts_the_cards_passes():
    table = pd.DataFrame(
        {
            "method": ["gaze", "ver", "ocr"],
            "kind": ["method", "method", "refused"],
            "damage NCS max": [0.02, 0.3, np.nan],
            "damage set of max": ["attention sinks", "random 4k", np.nan],
            "damage verdict": ["pass", "fail", np.nan],
        }
    )
    text = findings.methods_damage_sentence(table)
    assert "1 of 2 methods' sets are more necessary" in text and ": gaze." in text
    assert "largest generic-damage NCS: 0.300 (random 4k, beside ver's set)" in text


def test_a_method_head_set_keeps_its_provenance(tmp_path):
    mask = np.zeros((8, 16), dtype=bool)
    mask[2, [1, 5]] = True
    provenance = {"method": "gaze", "citation": citation("gaze"), "parameters": {"n_items": 40, "seed": 0, "k": 2}}
    path = headsets.save(
        tmp_path / "gaze.json", model="toy", setting="gaze", selection="flat top-2", mask=mask,
        scores=np.arange(128.0).reshape(8, 16), provenance=provenance,
    )  # fmt: skip
    record = read_any(path, "toy", 8, 16)
    assert {key: record[key] for key in provenance} == provenance and record["heads"] == [[2, 5], [2, 1]]
    fields = {"model": "toy", "setting": "x", "selection": "y", "mask": mask, "scores": mask}
    with pytest.raises(ValueError, match="not among"):
        headsets.save(path, **fields, provenance={"by": "me"})
    with pytest.raises(headsets.HeadSetError, match="parameters"):
        headsets.save(path, **fields, provenance={"parameters": 3})
