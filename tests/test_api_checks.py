"""Nothing silent in the engine's API: masks of every width and offset give the eager oracle's numbers or a refusal
naming both widths; bf16 pixel values run; the copy ledger is a hook a run installs; Llama 4 is refused before
its weights load."""

import json
import re
import subprocess
import sys
import time

import pytest
import torch

from helpers.engine import ATTENTION, HIDE, Intervention, Read, probe, run_head_sets, wrap_model
from helpers.storage import ledger, paths
from tests.oracle import ORACLE, biased
from tests.test_engine import _eager_mass, _groups, _head_set, _oracle_logits, _second_row
from tests.tiny_models import tiny_inputs, tiny_model

TOLERANCE = 1e-5  # the engine tests' bound on |engine - eager oracle|
SWEEP_FAMILIES = ("qwen3_vl", "llava")  # two families of different layouts (Qwen's merged patch grid, LLaVA's square)
OFFSETS = (-1, 0, 1)


@pytest.fixture(scope="module", params=SWEEP_FAMILIES)
def family(request):
    lm, oracle = wrap_model(tiny_model(request.param, ATTENTION)), tiny_model(request.param, ORACLE)
    return lm, oracle, tiny_inputs(request.param, lm.model)


def _resized(mask: torch.Tensor, width: int, offset: int) -> torch.Tensor:
    """`mask` [B, T] moved by `offset` positions, then cut or zero-padded at the end to `width` positions."""
    moved = mask.roll(offset, 1)
    return torch.nn.functional.pad(moved, (0, max(0, width - moved.shape[1])))[:, :width]


def _outcome(compute: tuple, expected: tuple, width: int, T: int) -> str:
    """ "exact" when compute (a function and its arguments) equals expected (the oracle on the same mask), "refused"
    when it raises a ValueError; a refusal of a mask of another width must name both widths."""
    try:
        got = compute[0](*compute[1:])
    except ValueError as error:
        if width != T:
            assert f"{width} positions wide" in str(error) and str(T) in str(error), str(error)
        return "refused"
    error = float((got - expected[0](*expected[1:])).abs().max())
    assert error < TOLERANCE, f"width {width} (T = {T}): off by {error:.2e} from the oracle"
    return "exact"


@torch.no_grad()
def test_masks_of_any_width_and_offset_are_exact_or_refused(family):
    """Keys, rows and read groups at widths T - 2 .. T + 2 and offsets -1, 0, 1: the probe's and run_head_sets'
    numbers equal the eager oracle's on the same mask, or the call is refused; every other width is refused."""
    lm, oracle, inputs = family
    T = inputs["input_ids"].shape[1]
    heads, groups = _head_set(lm, 2), _groups(lm, inputs)
    last = torch.zeros(2, T, dtype=torch.bool)
    last[:, T - 3 :] = True
    item = _second_row(inputs)  # one item, T' positions
    item_T = item["input_ids"].shape[1]
    item_image, every_key = lm.adapter.image_positions(item["input_ids"]), torch.ones(1, item_T, dtype=torch.bool)
    one_set = _head_set(lm, 1)
    outcomes = {}
    for width in range(T - 2, T + 3):
        for offset in OFFSETS:
            keys, rows = _resized(groups["first_half"], width, offset), _resized(last, width, offset)
            image = _resized(groups["image"], width, offset)
            cases = {
                "probe keys": (
                    (_intervened, lm, inputs, heads, keys, last),
                    (_oracle_logits, lm, oracle, inputs, heads, last, keys, HIDE),
                ),
                "probe rows": (
                    (_intervened, lm, inputs, heads, groups["first_half"], rows),
                    (_oracle_logits, lm, oracle, inputs, heads, rows, groups["first_half"], HIDE),
                ),
                "read group": ((_read, lm, inputs, last, image), (_oracle_mass, oracle, inputs, last, image)),
                "read rows": (
                    (_read, lm, inputs, rows, groups["image"]),
                    (_oracle_mass, oracle, inputs, rows, groups["image"]),
                ),
            }
            for name, (compute, expected) in cases.items():
                outcomes[name, width, offset] = _outcome(compute, expected, width, T)
            item_width = item_T + width - T  # the same sweep on the one item of run_head_sets
            keys, rows = _resized(item_image, item_width, offset), _resized(last[1:, T - item_T :], item_width, offset)
            outcomes["run_head_sets keys", width, offset] = _outcome(
                (_last_logits, lm, item, one_set, keys, HIDE, "all"),
                (_oracle_last, lm, oracle, item, one_set, every_key, keys, HIDE),
                item_width,
                item_T,
            )
            outcomes["run_head_sets rows", width, offset] = _outcome(
                (_last_logits, lm, item, one_set, every_key, 2.5, rows),
                (_oracle_last, lm, oracle, item, one_set, rows, every_key, 2.5),
                item_width,
                item_T,
            )
    wrong = [key for key, outcome in outcomes.items() if key[1] != T and outcome != "refused"]
    assert wrong == [], f"masks of another width not refused: {wrong}"
    exact = [key for key, outcome in outcomes.items() if outcome == "exact"]
    assert {name for name, width, offset in exact if width == T and offset == 0} == {n for n, _, _ in outcomes}
    print(f"{len(exact)} exact, {len(outcomes) - len(exact)} refused of {len(outcomes)}")


def _last_logits(lm, item, heads, keys, bias, rows):
    return run_head_sets(lm, item, heads, keys, bias, rows, logits_to_keep=1)


def _oracle_last(lm, oracle, item, heads, rows, keys, bias):
    return _oracle_logits(lm, oracle, item, heads, rows, keys, bias)[:, -1:]


def _intervened(lm, inputs, heads, keys, rows):
    with probe(lm, intervene=Intervention(heads=heads, keys=keys, bias=HIDE, query_rows=rows)):
        return lm.model(**inputs).logits


def _read(lm, inputs, rows, image):
    with probe(lm, read=Read(query_rows=rows, groups={"image": image})) as recording:
        lm.model(**inputs)
    return recording.mass


def _oracle_mass(oracle, inputs, rows, image):
    """The eager oracle's mass to `image` from `rows` that are not pads (a pad row reads nothing in the engine)."""
    with biased({}):  # the oracle as plain eager attention
        attentions = oracle(**inputs, output_attentions=True).attentions
    return _eager_mass(attentions, {"image": image}, rows & inputs["attention_mask"].bool())


@torch.no_grad()
def test_generate_takes_masks_wider_by_its_new_tokens_only(family):
    """generate's later steps run past the prompt's T: a mask wider by the new tokens is taken, one wider still is
    refused when the probe closes, and one narrower than the prompt at its first step."""
    lm, _, inputs = family
    T, new = inputs["input_ids"].shape[1], 3
    image = _groups(lm, inputs)["image"]
    for width, taken in ((T + new, True), (T + new + 1, False), (T - 1, False)):
        rows = torch.zeros(2, width, dtype=torch.bool)
        rows[:, T - 2 :] = True
        group = torch.nn.functional.pad(image, (0, max(0, width - T)))[:, :width]
        try:
            with probe(lm, read=Read(query_rows=rows, groups={"image": group})) as recording:
                lm.model.generate(**inputs, max_new_tokens=new, do_sample=False)
        except ValueError as error:
            assert not taken and f"{width} positions wide" in str(error), str(error)
        else:
            assert taken and torch.isfinite(recording.mass).all()


def test_bf16_pixel_values_run_on_fp32_and_bf16_models(lm):
    """The usual `inputs.to(model.dtype)` step: bf16 pixel values give the logits of the same values in the
    model's dtype (the vision tower casts them), on the fp32 toy and on the toy in bf16, with the ledger open."""
    from helpers.engine import build_batch, load_model
    from helpers.stimuli.corpora import load_corpus, single_image_items

    item = single_image_items(load_corpus("co"), 1, 3, "matched")[0]
    heads = torch.zeros(2, len(lm.adapter.candidate_layers), lm.adapter.n_heads, dtype=torch.bool)
    heads[0, 2, :4] = heads[1, 5, 8:] = True
    for model in (lm, load_model("toy", dtype="bfloat16")):
        batch = build_batch(model.processor, [item])
        half = dict(batch.inputs, pixel_values=batch.inputs["pixel_values"].to(torch.bfloat16))
        same = dict(batch.inputs, pixel_values=half["pixel_values"].to(model.model.dtype))
        with ledger.computing("bf16") as tally:  # the ledger hashes the bf16 inputs
            got = run_head_sets(model, half, heads, batch.image_mask, HIDE, logits_to_keep=1)
        expected = run_head_sets(model, same, heads, batch.image_mask, HIDE, logits_to_keep=1)
        assert torch.equal(got, expected) and len(tally.all_digests()) == 2


def test_with_no_run_open_the_engine_never_touches_the_ledger(lm, sets, monkeypatch):
    """No counter installed: run_head_sets and probe hash nothing and record nothing (the hashing raises here);
    the counter installed with no ledger open does neither; inside a chunk it counts every copy."""
    from helpers.engine import build_batch, copy_hook, copy_ledger, image_mass
    from helpers.stimuli.corpora import load_corpus, single_image_items

    batch = build_batch(lm.processor, single_image_items(load_corpus("co"), 1, 3, "matched"))
    heads = torch.as_tensor(sets)

    def touched(*args, **kwargs):
        raise AssertionError("the engine touched the copy ledger with no run open")

    def calls():
        logits = run_head_sets(lm, batch, heads, batch.image_mask, HIDE, logits_to_keep=1)
        return logits, image_mass(lm, batch, row_group="last")

    with_ledger = calls()
    for name in ("copy_digests", "probe_digests", "call_flops", "_model"):
        monkeypatch.setattr(copy_ledger, name, touched)
    monkeypatch.setattr(ledger, "record_copies", touched)
    monkeypatch.delenv(ledger.LEDGER_ENV, raising=False)
    monkeypatch.setattr(copy_hook, "_INSTALLED", [])
    without_counter = calls()
    copy_hook.install(copy_ledger.LedgerCounter())
    for logits, mass in (without_counter, calls()):  # the counter installed, no ledger open
        assert torch.equal(logits, with_ledger[0]) and torch.equal(mass, with_ledger[1])
    with pytest.raises(AssertionError, match="touched the copy ledger"), ledger.computing("open"):
        calls()


def test_llama4_is_refused_before_its_weights_load(tmp_path):
    """A Llama 4 save_pretrained folder: refused from its config.json with the reason (its image tokens are the
    <|patch|> tokens, not the <|image|> marker the generic adapter would take)."""
    from transformers import Llama4Config

    from helpers.runner import params

    Llama4Config(text_config=dict(num_hidden_layers=2, hidden_size=32)).save_pretrained(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"")  # weights and a chat template exist; the weights never load
    (tmp_path / "chat_template.jinja").write_text("{{ messages }}")
    with pytest.raises(params.ParameterError, match=r"'llama4' marks each image with an <\|image\|> token"):
        params.validate({"model": str(tmp_path), "k": 0.1}, "03_cers")


def _refused(argv: list[str]) -> tuple[str, float, list[str]]:
    """`python -m helpers.protocol argv` in a fresh process: its refusal, seconds, and whether torch was imported."""
    script = (
        "import sys, time\nbegan = time.perf_counter()\nfrom helpers import protocol\ntry:\n"
        "    protocol.main(sys.argv[1:])\nexcept SystemExit as e:\n    print(e)\n"
        "print(round(time.perf_counter() - began, 2))\nprint(sorted({'papermill', 'torch'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True, cwd=paths.ROOT)
    message, seconds, imported = done.stdout.strip().splitlines()[-3:]
    return message, float(seconds), json.loads(imported.replace("'", '"'))


def test_the_card_refuses_a_bad_out_and_a_malformed_file_before_torch(tmp_path):
    """helpers.protocol shares the runner's --out check and refuses a malformed head-set file before torch."""
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "broken.json").write_text("{not json")
    cases = {
        "--out an existing file": (["--out", str(tmp_path / "a_file")], "existing file"),
        "--out under /proc": (["--out", "/proc/nope"], "out_dir"),
        "a malformed head-set file": (["--out", str(tmp_path / "run")], "not valid JSON"),
    }
    for name, (argv, fragment) in cases.items():
        began = time.perf_counter()
        message, _, imported = _refused(["--model", "toy", "--heads", str(tmp_path / "broken.json"), *argv])
        assert fragment in message and imported == [], (name, message, imported)
        print(f"{name}: refused in {time.perf_counter() - began:.2f} s")
    assert not (tmp_path / "run").exists()


def test_a_head_set_of_another_model_is_carded_only_when_accepted(tmp_path):
    """A head-set file naming another model is refused before the card's model loads, accepted with
    heads_from_other_model, and then named in the first line of the card."""
    from helpers.runner import params
    from helpers.studies.protocol import render

    path = tmp_path / "theirs.json"
    record = {"model": "Qwen/Qwen3-VL-8B-Instruct", "setting": "theirs", "n_layers": 8, "n_heads": 16}
    path.write_text(json.dumps({**record, "heads": [[0, 1], [3, 4]]}))
    card = {"model": "toy", "heads": [str(path)], "out_dir": str(tmp_path / "out")}
    with pytest.raises(
        params.ParameterError, match="was discovered on model 'Qwen/Qwen3-VL-8B-Instruct', not on 'toy'"
    ):
        params.validate(card, "07_protocol")
    assert params.validate({**card, "heads_from_other_model": True}, "07_protocol").heads == [str(path)]
    meta = {"model": "toy", "weights fingerprint": "f", "profile": "default", "eval corpus": "co", "beta": 10.0}
    meta |= {"seed": 0, "seconds": 1.0, "forward copies": {"ncs": 10}, "sizes": {"n_items": 5, "n_random": 3}}
    meta |= {"other model's head-sets": {"theirs": "Qwen/Qwen3-VL-8B-Instruct"}}
    meta["sizes"]["n_random_any"] = 3
    first = render._header({"meta": meta})[0]
    assert (
        first
        == "Head-sets discovered on another model, carded on toy on purpose: theirs (model Qwen/Qwen3-VL-8B-Instruct)."
    )


def test_letter_probs_and_image_mass_name_a_bad_argument(lm):
    """letter_probs_under's and image_mass's arguments refused with the value and what is allowed."""
    from helpers.engine import build_batch, image_mass
    from helpers.engine.mcq import letter_probs_under
    from helpers.stimuli.corpora import load_corpus, single_image_items

    batch = build_batch(lm.processor, single_image_items(load_corpus("co"), 1, 3, "matched"))
    heads = torch.ones(1, len(lm.adapter.candidate_layers), lm.adapter.n_heads, dtype=torch.bool)
    refusals = {
        "sets_per_forward=0: use a whole number >= 1": lambda: letter_probs_under(
            lm, batch, heads, batch.image_mask, HIDE, sets_per_forward=0
        ),
        "keys must be a bool tensor [1, 47] or [1, 47], got NoneType": lambda: letter_probs_under(
            lm, batch, heads, None, HIDE
        ),
        "bias='x' (str): use a float or HIDE": lambda: letter_probs_under(lm, batch, heads, batch.image_mask, "x"),
        "row group 'first' is not one of": lambda: image_mass(lm, batch, row_group="first"),
    }
    for fragment, call in refusals.items():
        with pytest.raises(ValueError, match=re.escape(fragment)):
            call()
