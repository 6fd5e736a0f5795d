"""The report card on the toy at small sizes: every check gets a verdict, a random set fails necessity,
evaluation data out of the baseline audit's range make the dependent checks "not interpretable", the
numbers are those of notebooks 03-04 at the same parameters, and the command writes report.md / .html."""

import json
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from helpers import protocol, run, sizes
from helpers.engine import load_model
from helpers.measures import verdicts
from helpers.measures.controls import layer_matched_controls, layer_matched_sets
from helpers.measures.methods import PER_ITEM
from helpers.measures.methods.cached import method_run, method_score
from helpers.measures.methods.ceiling import half_split_ceiling
from helpers.measures.necessity import ncs
from helpers.measures.overlap import split_halves, top_k
from helpers.measures.stats import against_random
from helpers.measures.steering import cers
from helpers.runner import params
from helpers.runner.card_inputs import NotebookProtocol as Protocol
from helpers.runner.card_inputs import refuse_unservable
from helpers.runner.cli import parameter_overrides
from helpers.stimuli.design import SETTINGS
from helpers.storage import cache, headsets, paths
from helpers.storage.cache import ResultCache
from helpers.studies.evaluation import Evaluation
from helpers.studies.experiment import Experiment
from helpers.studies.protocol import build_card, verdict_table
from tests.tiny_models import tiny_model

SIZES = {"n_items": 8, "n_random": 20, "n_random_any": 20, "n_sweep": 2, "betas": [10]}
SIZES.update(n_strips=32, n_splits=10)
PER_SET_CHECKS = {"discovery noise ceiling", *verdicts.DEPENDS_ON}
AUDIT_CHECKS = {f"baseline: {name}" for name in verdicts.AUDIT_RANGES}


def parameters(tmp_path, heads, **changes) -> SimpleNamespace:
    values = dict(
        model="toy", device="cpu", dtype="float32", heads=heads, method=None, import_k=None, profile="default"
    )
    values.update(
        sizes=SIZES, eval_corpus="co", beta=10.0, sets_per_forward=64, seed=0, interactive=False, smoke=False
    )
    values.update(out_dir=None, data_dir=None, cache_dir=None)
    values.update(changes)
    checked = params.validate(values)
    checked.data_dir, checked.cache_dir = paths.DATA, tmp_path / "cache"
    return checked


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory):
    return tmp_path_factory.mktemp("protocol")


@pytest.fixture(scope="module")
def discovered(cache_root):
    P = parameters(cache_root, ["co-ref-qsp"])
    return P, build_card(Protocol(P))


@pytest.fixture(scope="module")
def random_card(cache_root):
    # one draw of the layer-matched controls' kind: co-ref-qsp's count per layer, none of its heads
    mask = layer_matched_sets(headsets.load(paths.DATA / "headsets" / "co-ref-qsp.json")["mask"], 1, 20261202)[0]
    path = headsets.save(cache_root / "random-11.json", model="toy", setting="random", selection="random", mask=mask,
                         scores=np.zeros((8, 16)))  # fmt: skip
    return build_card(Protocol(parameters(cache_root, [str(path)])))


def verdict_of(card, head_set, check) -> str:
    table = card["verdicts"]
    return table[(table["head-set"] == head_set) & (table["check"] == check)]["verdict"].item()


@pytest.mark.slow
def test_a_discovered_set_gets_a_verdict_on_every_check(discovered):
    _, card = discovered
    table = card["verdicts"]
    assert set(table["check"]) == PER_SET_CHECKS | AUDIT_CHECKS and len(table) == len(PER_SET_CHECKS) + 4
    assert set(table["verdict"]) <= {verdicts.PASS, verdicts.FAIL, verdicts.NOT_INTERPRETABLE}
    assert (table["number"].str.len() > 0).all() and (table["reason"].str.len() > 0).all()
    assert verdict_of(card, "co-ref-qsp", "NCS vs layer-matched") == verdicts.PASS  # the toy's set is necessary
    nec = card["necessity"].set_index("measure")
    assert nec.loc["NCS", "p"] == pytest.approx(1 / 21) and nec.loc["NCS", "S"] > nec.loc["NCS", "random max"]
    assert nec.loc["NCS", "p floor"] == pytest.approx(1 / 21) and nec.loc["NCS", "p Holm"] == nec.loc["NCS", "p"]
    provenance = card["provenance"].iloc[0]
    assert (provenance["corpus"], provenance["query"], provenance["source"], provenance["k"]) == (
        "co",
        "ref",
        "qsp",
        11,
    )
    assert 0 < provenance["noise ceiling"] <= 11 and provenance["weights fingerprint"].startswith("toy")
    assert card["conclusion"][1].startswith("co-ref-qsp is necessary beyond its layer-matched random sets")


@pytest.mark.slow
def test_numbers_are_those_of_notebooks_03_and_04(discovered):
    """The same draws and cached runs as 03's and 04's Table 3 at the same sizes."""
    P, card = discovered
    exp_params = SimpleNamespace(
        **vars(P), n_items=SIZES["n_items"], n_random=SIZES["n_random"], row_group="all", torch_compile=False
    )
    exp = Experiment(exp_params)
    stack = exp.with_controls("co-ref-qsp", SIZES["n_random"])
    assert np.array_equal(stack[1:], layer_matched_controls(exp.discovered["co-ref-qsp"], "co-ref-qsp", 20, 0))
    values = ncs(exp.mask(stack))
    expected = against_random(values[:, 0], values[:, 1:])
    row = card["necessity"].set_index("measure").loc["NCS"]
    for column in ("S", "S low", "S high", "random mean", "p", "z"):
        assert row[column] == pytest.approx(expected[column], abs=1e-12)
    values = cers(exp.steer(stack))
    expected = against_random(values[:, 0], values[:, 1:])
    row = card["steerability"].set_index("control").loc["layer-matched"]
    assert row["S"] == pytest.approx(expected["S"], abs=1e-12) and row["p"] == expected["p"]


@pytest.mark.slow
def test_a_large_r_run_in_two_parts_equals_the_one_run(discovered):
    """mask_controls joins S + the first n_random sets (an earlier table's cached run) and the sets after them;
    other copies in a forward change a copy's rounding, not more."""
    P, _ = discovered
    exp = Experiment(SimpleNamespace(**vars(P), n_items=4, n_random=3, row_group="all", torch_compile=False))
    joined = exp.mask_controls("co-ref-qsp", 5)
    whole = exp.mask(exp.with_controls("co-ref-qsp", 5))
    assert joined.keys() == whole.keys()
    for key, value in whole.items():
        np.testing.assert_allclose(joined[key], value, rtol=0, atol=1e-6, err_msg=key)
    first = exp.mask(exp.with_controls("co-ref-qsp", 3))["matched_p_masked"]  # the cached run of S + 3
    assert np.array_equal(joined["matched_p_masked"][:, :4], first)
    assert joined["matched_p_masked"].shape == (4, 6, 4)


@pytest.mark.slow
def test_a_random_set_fails_necessity(random_card):
    assert verdict_of(random_card, "random-11", "NCS vs layer-matched") == verdicts.FAIL
    assert verdict_of(random_card, "random-11", "discovery noise ceiling") == verdicts.NOT_RUN
    row = random_card["necessity"].set_index("measure").loc["NCS"]
    assert row["p"] > verdicts.ALPHA and row["S"] < row["random max"]


@pytest.mark.slow
def test_two_sets_are_holm_adjusted_and_the_floor_makes_them_not_interpretable(cache_root, random_card):
    """At R = 20 two head-sets can reach at best Holm p = 2/21 > .05: not interpretable, not a fail."""
    P = parameters(cache_root, ["co-ref-qsp", str(cache_root / "random-11.json")])
    card = build_card(Protocol(P))
    nec = card["necessity"][card["necessity"]["measure"] == "NCS"].set_index("head-set")
    assert nec.loc["co-ref-qsp", "p Holm"] == pytest.approx(2 / 21)
    assert verdict_of(card, "co-ref-qsp", "NCS vs layer-matched") == verdicts.NOT_INTERPRETABLE


def blank_corpus(folder):
    """An image folder whose every class shows the same blank grey picture."""
    for label in ("red_star", "blue_ring", "green_circle", "yellow_cross", "purple_square", "black_triangle"):
        (folder / label).mkdir(parents=True)
        Image.new("RGB", (64, 64), (128, 128, 128)).save(folder / label / "blank.png")
    return folder


@pytest.mark.slow
def test_blank_evaluation_images_make_the_single_image_checks_not_interpretable(cache_root):
    corpus = blank_corpus(cache_root / "blank_corpus")
    sizes = {**SIZES, "n_random": 3, "n_random_any": 3}
    card = build_card(Protocol(parameters(cache_root, ["co-ref-qsp"], eval_corpus=str(corpus), sizes=sizes)))
    audit = card["audit"].set_index("audit")["P(correct)"]
    assert audit["matched"] < 0.5 and verdict_of(card, "(evaluation data)", "baseline: matched") == verdicts.FAIL
    failed = {c.removeprefix("baseline: ") for c, v in zip(card["verdicts"]["check"], card["verdicts"]["verdict"])
              if c.startswith("baseline: ") and v == verdicts.FAIL}  # fmt: skip
    table = card["verdicts"].set_index("check")
    for check, audits in verdicts.DEPENDS_ON.items():
        blocked = set(audits) & failed
        assert ("baseline out of range" in table.loc[check, "reason"]) == bool(blocked), check
        if blocked:
            assert table.loc[check, "verdict"] == verdicts.NOT_INTERPRETABLE
            assert all(name in table.loc[check, "reason"] for name in blocked)
    assert card["conclusion"][0].startswith("The evaluation data fail the baseline audit (")


def test_an_audit_forced_out_of_range_blocks_its_checks():
    audits = verdicts.audit_verdicts({"oracle": 0.6, "blank": 0.25, "matched": 0.99, "mismatched": 0.24})
    assert [v.verdict for v in audits] == [verdicts.FAIL, verdicts.PASS, verdicts.PASS, verdicts.PASS]
    row = {"S": 0.3, "random mean": 0.0, "p": 1 / 101, "p Holm": 1 / 101, "z": 9.0}
    assert (
        verdicts.against_random_verdict("S", "CERS vs layer-matched", row, 100, 1, audits).verdict
        == "not interpretable"
    )
    assert verdicts.against_random_verdict("S", "NCS vs layer-matched", row, 100, 1, audits).verdict == "pass"
    assert verdicts.holm_floor(20, 12) == pytest.approx(12 / 21)


def test_forward_copies_of_the_profiles():
    quick = sizes.card_forward_copies(sizes.CARD_SIZES["default"])
    assert quick["NCS (S + R, two arms)"] == 21 * 2 * 50
    paper = sizes.card_forward_copies(sizes.CARD_SIZES["paper"])
    assert paper["NCS (S + R, two arms)"] == 101 * 2 * 400 and sum(paper.values()) > 8 * sum(quick.values())


@pytest.mark.notebooks
def test_the_command_writes_report_md_and_html(tmp_path, discovered):
    P, _ = discovered
    sizes = ["-p", "n_items", "8", "-p", "n_random", "20", "-p", "n_random_any", "20", "-p", "n_sweep", "2"]
    sizes += ["-p", "betas", "[10]", "-p", "n_strips", "32", "-p", "n_splits", "10"]
    command = [
        sys.executable,
        "-m",
        "helpers.protocol",
        "--model",
        "toy",
        "--heads",
        "co-ref-qsp",
        "--out",
        str(tmp_path),
    ]
    proc = subprocess.run(command + sizes + ["-p", "cache_dir", str(P.cache_dir)], cwd=paths.ROOT, capture_output=True,
                          text=True, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    md = (tmp_path / "notebooks" / "report.md").read_text()
    assert "## Verdicts" in md and "| co-ref-qsp | NCS vs layer-matched | pass |" in md
    html = (tmp_path / "notebooks" / "report.html").read_text()
    assert "<table" in html and "data:image/png;base64," in html
    card = json.loads((tmp_path / "notebooks" / "card.json").read_text())
    assert card["meta"]["sizes"]["n_items"] == 8 and len(card["verdicts"]) == len(PER_SET_CHECKS) + 4
    assert (tmp_path / "notebooks" / "07_protocol.ipynb").exists() and (tmp_path / "protocol_verdicts.csv").exists()
    assert SETTINGS.index("co-ref-qsp") == 10


def test_the_card_discovers_a_method_on_the_model_it_loads_once(tmp_path, monkeypatch):
    loads = []
    monkeypatch.setattr(
        "helpers.studies.protocol.card.load_model", lambda *a, **kw: loads.append(a) or load_model(*a, **kw)
    )
    P = parameters(tmp_path, [], method="ver", smoke=True, out_dir=str(tmp_path))
    card_protocol = Protocol(P)
    assert len(loads) == 1 and [h.name for h in card_protocol.head_sets] == ["ver"]
    record = card_protocol.head_sets[0].record
    assert record["method"] == "ver" and record["parameters"]["n_items"] == sizes.SMOKE_SIZES["n_items"]
    score = method_score(card_protocol.lm, "ver", sizes.SMOKE_SIZES["n_items"], 0, ResultCache(P.cache_dir))
    np.testing.assert_array_equal(record["mask"], top_k(score, 11))
    assert (tmp_path / "headsets" / "ver.json").exists()
    ceiling = card_protocol.ceiling(card_protocol.head_sets[0])  # the method's own half-splits
    run = method_run(card_protocol.lm, "ver", sizes.SMOKE_SIZES["n_items"], 0, ResultCache(P.cache_dir))
    splits = split_halves(sizes.SMOKE_SIZES["n_items"], card_protocol.sizes["n_splits"], 0)
    expected = half_split_ceiling(run, PER_ITEM["ver"][1], 11, splits)
    assert ceiling["ceiling"] == pytest.approx(np.nanmean(expected)) and ceiling["k"] == 11
    assert ceiling["n_splits"] == int((~np.isnan(expected)).sum()) > 0


def test_a_region_method_is_refused_before_a_model_without_region_mapping_loads(tmp_path):
    tiny_model("cohere2_vision", "sdpa").save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="method 'gaze' reads the image tokens of regions. cohere2_vision"):
        refuse_unservable("gaze", str(tmp_path))
    refuse_unservable("ablation", str(tmp_path))  # no region read: served
    with pytest.raises(SystemExit) as refused:  # the command: the reason in one line, no traceback
        protocol.main(["--model", str(tmp_path), "--method", "gaze"])
    message = str(refused.value)
    assert message.startswith("method 'gaze' reads the image tokens of regions. cohere2_vision")
    assert "\n" not in message


@pytest.fixture
def run_overrides(tmp_path, monkeypatch):
    """The overrides each command hands the runner (helpers.run.run, stopped there): a list, one per call."""
    given = []

    def stop(sources, overrides, *args, **kwargs):
        given.append(overrides)
        raise SystemExit("stopped before any notebook")

    monkeypatch.setenv(cache.PROGRESS_ENV, "0")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(run, "run", stop)
    return given


def test_the_runner_and_the_card_read_p_alike(tmp_path, run_overrides):
    """`-p NAME VALUE` goes through one parser (helpers.runner.cli) in python -m helpers.run and helpers.protocol:
    values as Python literals, folders relative to where the command runs."""
    pairs = [["beta", "3"], ["device", "cpu"], ["cache_dir", "results"], ["eval_corpus", "co"], ["seed", "7"]]
    argv = [item for pair in pairs for item in ("-p", *pair)] + ["--out", str(tmp_path / "run")]
    for command, first in ((run.main, ["07", "--jobs", "1"]), (protocol.main, ["--heads", "co-ref-qsp"])):
        with pytest.raises(SystemExit, match="stopped before any notebook"):
            command([*first, *argv])
    expected = {"beta": 3, "device": "cpu", "cache_dir": str(tmp_path / "results"), "eval_corpus": "co", "seed": 7}
    assert parameter_overrides(pairs) == expected
    runner, card = run_overrides
    assert runner == expected and card == {"model": "toy", "heads": ["co-ref-qsp"], "profile": "default", **expected}


def test_the_card_takes_the_notebooks_profile_names(tmp_path, run_overrides):
    for profile in sizes.PROFILE_NAMES:  # the notebooks' `profile`
        with pytest.raises(SystemExit, match="stopped before any notebook"):
            protocol.main(["--heads", "co-ref-qsp", "--profile", profile, "--out", str(tmp_path / "run")])
    assert [overrides["profile"] for overrides in run_overrides] == ["default", "paper"]
    with pytest.raises(SystemExit) as refused:
        protocol.main(["--heads", "co-ref-qsp", "--profile", "quick"])
    message = str(refused.value)
    assert message == "--profile quick: parameter profile='quick' is not allowed; allowed: 'default', 'paper'"


def test_the_command_module_is_the_command_only():
    """The card lives in helpers/studies/protocol; helpers/protocol.py is its command and notebook 07's names."""
    from helpers.studies import protocol as card

    assert len((paths.HELPERS / "protocol.py").read_text().splitlines()) <= 95  # with its checks before torch
    assert (protocol.Protocol, protocol.build_card, protocol.write_report) == (Protocol, build_card, card.write_report)
    assert issubclass(Protocol, card.Protocol)


def test_the_card_needs_a_head_set_or_a_method():
    with pytest.raises(params.ParameterError, match="or a `method` to discover one"):
        params.validate({"heads": []})
    assert params.validate({"heads": [], "method": "gaze"}).heads == []
    with pytest.raises(params.ParameterError, match="published method: gaze, ver"):
        params.validate({"method": "gazer"})


def test_the_generic_damage_of_a_set_is_its_masking_runs(tmp_path):
    """Evaluation.generic_damage's own row holds the NCS of S's necessity run, and its sets are Table 12's."""
    mask = headsets.load(paths.DATA / "headsets" / "co-ref-qsp.json")["mask"]
    lm = load_model("toy")
    evaluation = Evaluation(lm, "co", 2, 0, ResultCache(tmp_path))
    table = evaluation.generic_damage(mask)
    assert table["damage set"].tolist()[0] == "discovered" and len(table) == 6
    assert table["NCS"].iloc[0] == pytest.approx(ncs(evaluation.mask(mask[None])).mean())
    assert table["overlap with S"].iloc[0] == mask.sum() and table["heads"].iloc[-1] == 4 * mask.sum()


def test_verdicts_need_the_minimum_effect():
    """A rank p at its floor does not pass on an effect below MIN_EFFECT; the beta sweep ignores float noise."""
    audits = verdicts.audit_verdicts({"oracle": 1.0, "blank": 0.25, "matched": 0.99, "mismatched": 0.25})
    noise = {"S": 3e-4, "random mean": 1e-4, "p": 1 / 21, "p Holm": 1 / 21, "z": 1000.0}
    below = verdicts.against_random_verdict("S", "NCS vs layer-matched", noise, 20, 1, audits)
    assert below.verdict == verdicts.FAIL and "minimum effect" in below.reason
    visible = {**noise, "S": 0.0101 + 1e-4}
    assert verdicts.against_random_verdict("S", "NCS vs layer-matched", visible, 20, 1, audits).verdict == "pass"
    assert verdicts.exceeds(0.01) and not verdicts.exceeds(0.0094) and not verdicts.exceeds(8e-6)

    def sweep(margins):
        return pd.DataFrame({"beta": [1.0, 10.0], "S": [m + 0.5 for m in margins], "random max": [0.5, 0.5],
                             "random sets": [5, 5]})  # fmt: skip

    for margins in ([8e-6, 0.3], [-1e-6, 0.3]):  # float noise at beta = 1 decides nothing: both fail there
        result = verdicts.sweep_verdict("S", sweep(margins), audits)
        assert result.verdict == verdicts.FAIL and result.reason.endswith("at beta 1")
    assert verdicts.sweep_verdict("S", sweep([0.02, 0.3]), audits).verdict == verdicts.PASS


def test_a_family_without_region_mapping_gets_its_region_checks_not_run():
    """verdict_table on a card whose model maps no regions: NCS and its row groups are judged, the region
    checks (noise ceiling, NCS_grid, CERS, the sweep) are "not run" with the family's reason."""
    row = {"S": 0.4, "S low": 0.3, "random mean": 0.05, "p": 1 / 21, "p Holm": 1 / 21, "z": 5.0}
    reason = "cohere2_vision has no region mapping (pixel region -> image tokens)"
    card = {
        "meta": {"sizes": {"n_random": 20, "n_random_any": 20}, "head-sets": ["S"], "not run": reason},
        "necessity": pd.DataFrame([{"head-set": "S", "measure": "NCS", **row}]),
        "steerability": pd.DataFrame(),
        "sweep": pd.DataFrame(),
        "damage": pd.DataFrame(
            [
                {"head-set": "S", "damage set": "discovered", "NCS": 0.4},
                {"head-set": "S", "damage set": "random 2k", "NCS": 0.1},
            ]
        ),  # fmt: skip
        "row_groups": pd.DataFrame([{"head-set": "S", "row group": g, **row} for g in ("all", "prompt", "last")]),
    }
    audits = verdicts.audit_verdicts({"oracle": 1.0, "blank": 0.25, "matched": 0.99, "mismatched": 0.25})
    table = verdict_table(card, audits, {"S": None}).set_index("check")
    not_run = ["discovery noise ceiling", "NCS_grid vs layer-matched", "CERS vs layer-matched", "CERS vs any-layer",
               "CERS beta sweep"]  # fmt: skip
    assert (table.loc[not_run, "verdict"] == verdicts.NOT_RUN).all() and (table.loc[not_run, "reason"] == reason).all()
    judged = ["NCS vs layer-matched", "generic damage", "NCS at question + option rows", "NCS at the last row"]
    assert (table.loc[judged, "verdict"] == verdicts.PASS).all()
