"""A catalogue of bad inputs: each stops with a message naming the value and what is allowed, before any
forward pass, and without writing into the run's output or cache folders.

Categories: parameters (params.validate), the model's config before it loads (family, head counts, region
analyses, the report card's head-set files: params.validate with a notebook), the runner (helpers.run.main),
head-set files (headsets.load / load_settings), load_model, engine calls (probe, heads_to_mask, run_head_sets).
"""

import json
from dataclasses import dataclass
from pathlib import Path

import huggingface_hub
import pytest
import torch
from PIL import Image
from transformers import MllamaConfig

from helpers import protocol, run
from helpers.engine import (
    ATTENTION,
    HIDE,
    Intervention,
    Read,
    heads_to_mask,
    load_model,
    probe,
    run_head_sets,
    wrap_model,
)
from helpers.runner import params
from helpers.storage import headsets, paths
from tests.test_engine import _second_row
from tests.tiny_models import tiny_inputs, tiny_model

TOY_HEADS = "128 heads"  # the toy: 8 layers x 16 heads


@dataclass
class Folders:
    tmp: Path
    out: Path
    cache: Path


@dataclass
class Case:
    category: str
    name: str
    call: object  # Folders -> raises
    fragments: tuple[str, ...]  # the message names the value and what is allowed


def _validate(**values):
    return lambda f: params.validate({"out_dir": str(f.out), "cache_dir": str(f.cache), **values})


def _images(root: Path, labels=("cat", "dog", "car", "cup", "tree")) -> Path:
    for label in labels:
        (root / label).mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (8, 8), (len(label) * 20, 0, 0)).save(root / label / "0.png")
    return root


def _broken_image(f: Folders) -> str:
    root = _images(f.tmp / "pics")
    (root / "dog" / "1.png").write_bytes(b"not a png")
    return str(root)


def _csv(f: Folders, text: str) -> str:
    _images(f.tmp / "pics")
    (f.tmp / "list.csv").write_text(text)
    return str(f.tmp / "list.csv")


def _colliding(f: Folders) -> str:
    root = _images(f.tmp / "pics", ("hot_dog", "hot dog", "cat"))
    return str(root)


def _empty_class(f: Folders) -> str:
    root = _images(f.tmp / "pics")
    (root / "empty").mkdir()
    return str(root)


def _a_file(f: Folders) -> str:
    (f.tmp / "a_file").write_text("x")
    return str(f.tmp / "a_file")


def _model_folder(f: Folders, family: str) -> str:
    """A save_pretrained-shaped folder of a tiny `family` config (the checks read config.json; weights and the chat
    template only exist)."""
    folder = f.tmp / family
    folder.mkdir()
    if family == "mllama":
        config = MllamaConfig(
            text_config=dict(num_hidden_layers=2, cross_attention_layers=[1]),
            vision_config=dict(num_hidden_layers=1, num_global_layers=1),
        )
    else:
        config = tiny_model(family, "sdpa").config
    config.save_pretrained(folder)
    (folder / "model.safetensors").write_bytes(b"")
    (folder / "chat_template.jinja").write_text("{{ messages }}")
    return str(folder)


def _no_chat_template(f: Folders) -> str:
    folder = Path(_model_folder(f, "qwen3_vl"))
    (folder / "chat_template.jinja").unlink()
    (folder / "tokenizer_config.json").write_text('{"model_max_length": 512}')
    return str(folder)


def _no_weights(f: Folders) -> str:
    folder = f.tmp / "config-only"
    folder.mkdir()
    (folder / "config.json").write_text((paths.TOY_MODEL / "config.json").read_text())
    return str(folder)


def _head_file(f: Folders, heads) -> str:
    path = f.tmp / "my_heads.json"
    path.write_text(json.dumps({"model": "toy", "setting": "mine", "selection": "by hand", "k": len(heads),
                                "n_layers": 8, "n_heads": 16, "heads": heads}))  # fmt: skip
    return str(path)


def _card(**values):
    """The report card's notebook checks (07_protocol): its parameters, checked with the notebook named."""
    return lambda f: params.validate({"model": "toy", "out_dir": str(f.out), "cache_dir": str(f.cache), **values},
                                     "07_protocol")  # fmt: skip


def _no_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)


PARAMETERS = [
    Case("parameters", "k above the head count", _validate(k=129), ("k=129", TOY_HEADS, "from 1 to 128")),
    Case("parameters", "k_crossover above", _validate(k_crossover=500), ("k_crossover=500", TOY_HEADS)),
    Case("parameters", "ks entry above", _validate(ks=[4, 1000]), ("ks[1]=1000", TOY_HEADS)),
    Case("parameters", "k zero", _validate(k=0), ("k=0", "int >= 1")),
    Case("parameters", "k share 1.5", _validate(k=1.5), ("k=1.5", "share 0 < k < 1")),
    Case("parameters", "k boolean", _validate(k=True), ("k=True", "int >= 1")),
    Case("parameters", "device cuda without GPU", _validate(device="cuda"), ("device='cuda'", "no CUDA GPU", "'cpu'")),
    Case("parameters", "device cuda:0 without GPU", _validate(device="cuda:0"), ("device='cuda:0'", "no CUDA GPU")),
    Case("parameters", "device mps without MPS", _validate(device="mps"), ("device='mps'", "no Apple MPS")),
    Case("parameters", "device gpu", _validate(device="gpu"), ("device='gpu'", "cpu, cuda, mps, auto")),
    Case("parameters", "dtype fp8", _validate(dtype="fp8"), ("dtype='fp8'", "float32, bfloat16")),
    Case("parameters", "dtype int8", _validate(dtype="int8"), ("dtype='int8'", "float16")),
    Case(
        "parameters",
        "out_dir a file",
        lambda f: params.validate({"out_dir": _a_file(f)}),
        ("out_dir=", "existing file"),
    ),
    Case(
        "parameters",
        "cache_dir a file",
        lambda f: params.validate({"cache_dir": _a_file(f)}),
        ("cache_dir=", "existing file"),
    ),
    Case(
        "parameters",
        "data_dir a file",
        lambda f: params.validate({"data_dir": _a_file(f)}),
        ("data_dir=", "existing file"),
    ),
    Case(
        "parameters",
        "out_dir not writable",
        _validate(out_dir="/proc/1/run"),
        ("out_dir='/proc/1/run'", "not writable"),
    ),
    Case(
        "parameters",
        "cache_dir not writable",
        _validate(cache_dir="/proc/1/c"),
        ("cache_dir='/proc/1/c'", "not writable"),
    ),
    Case("parameters", "out_dir empty string", _validate(out_dir=""), ("out_dir=''", "folder path")),
    Case(
        "parameters",
        "model offline hub id",
        _validate(model="org/not-cached"),
        ("model='org/not-cached'", "HF_HUB_OFFLINE", "hf download"),
    ),
    Case("parameters", "model not a name", _validate(model="not a model"), ("model='not a model'", "hub id")),
    Case("parameters", "model empty", _validate(model=""), ("model=''", "'toy'")),
    Case("parameters", "model an int", _validate(model=3), ("model=3", "'toy'")),
    Case(
        "parameters",
        "model folder without config",
        lambda f: params.validate({"model": str(f.tmp)}),
        ("model=", "holds no config.json", "save_pretrained folder"),
    ),
    Case(
        "parameters",
        "corpus unreadable image",
        lambda f: params.validate({"eval_corpus": _broken_image(f)}),
        ("eval_corpus=", "1.png", "not a readable image"),
    ),
    Case(
        "parameters",
        "corpus CSV missing file",
        lambda f: params.validate({"eval_corpus": _csv(f, "path,label\npics/cat/9.png,cat\n")}),
        ("eval_corpus=", "pics/cat/9.png", "not a file"),
    ),
    Case(
        "parameters",
        "corpus CSV columns",
        lambda f: params.validate({"eval_corpus": _csv(f, "file,class\npics/cat/0.png,cat\n")}),
        ("eval_corpus=", "'path' and 'label'"),
    ),
    Case(
        "parameters",
        "corpus colliding classes",
        lambda f: params.validate({"eval_corpus": _colliding(f)}),
        ("eval_corpus=", "'hot dog' and 'hot_dog'"),
    ),
    Case(
        "parameters",
        "corpus empty class folder",
        lambda f: params.validate({"eval_corpus": _empty_class(f)}),
        ("eval_corpus=", "empty", "holds no images"),
    ),
    Case(
        "parameters",
        "corpus missing path",
        _validate(eval_corpus="/no/such/folder"),
        ("eval_corpus='/no/such/folder'", "'cm', 'co'", "CSV"),
    ),
    Case(
        "parameters",
        "corpus not CSV file",
        lambda f: params.validate({"eval_corpus": _a_file(f)}),
        ("eval_corpus=", "CSV of path,label"),
    ),
    Case(
        "parameters",
        "settings unknown",
        _validate(settings=["cm-xyz-last"]),
        ("settings=['cm-xyz-last']", "cm-ord-last"),
    ),
    Case("parameters", "n_items 1", _validate(n_items=1), ("n_items=1", "int >= 2")),
    Case("parameters", "n_strips string", _validate(n_strips="10"), ("n_strips='10'", "int >= 2")),
    Case("parameters", "seed negative", _validate(seed=-1), ("seed=-1", "int >= 0")),
    Case("parameters", "smoke string", _validate(smoke="yes"), ("smoke='yes'", "True or False")),
    Case("parameters", "beta zero", _validate(beta=0), ("beta=0", "finite number > 0")),
    Case("parameters", "betas empty", _validate(betas=[]), ("betas=[]", "non-empty list")),
    Case("parameters", "row_group unknown", _validate(row_group="question"), ("row_group='question'", "'prompt'")),
    Case("parameters", "rows, the old name", _validate(rows="last"), ("rows= is now row_group=",)),
    Case("parameters", "key_agg unknown", _validate(key_agg="median"), ("key_agg='median'", "'raw', 'share'")),
    Case("parameters", "row_agg unknown", _validate(row_agg="sum"), ("row_agg='sum'", "'mean', 'max'")),
    Case("parameters", "sets_per_forward zero", _validate(sets_per_forward=0), ("sets_per_forward=0", "int >= 1")),
    Case("parameters", "unknown name", _validate(n_itemz=3), ("'n_itemz'", "n_items")),
    Case(
        "parameters",
        "corpus of three classes",
        lambda f: params.validate({"eval_corpus": str(_images(f.tmp / "pics", ("cat", "dog", "car")))}),
        ("eval_corpus=", "3 class(es)", "at least 4 classes"),
    ),
    Case(
        "parameters",
        "model folder without weights",
        lambda f: params.validate({"model": _no_weights(f)}),
        ("model=", "holds no weights", "save_pretrained folder"),
    ),
    Case(
        "parameters",
        "model folder without a chat template",
        lambda f: params.validate({"model": _no_chat_template(f)}),
        ("model=", "holds no chat template", "chat_template.jinja", "tokenizer_config.json"),
    ),
    Case(
        "parameters",
        "hub id not cached, hub unreachable (online mode)",
        lambda f: params.validate({"model": "org/not-cached"}),
        ("model='org/not-cached'", "cannot be reached", "hf download", "local save_pretrained folder"),
    ),
]

BEFORE_LOADING = [
    Case(
        "model before loading",
        "unsupported family, k a share",
        lambda f: params.validate({"model": _model_folder(f, "mllama"), "k": 0.1}, "03_cers"),
        ("model=", "'mllama' feeds the image through cross-attention layers"),
    ),
    Case(
        "model before loading",
        "region notebook on a family without region mapping",
        lambda f: params.validate({"model": _model_folder(f, "cohere2_vision")}, "03_cers"),
        ("model=", "03_cers needs region analyses", "cohere2_vision has no region mapping"),
    ),
    Case(
        "model before loading",
        "discovery on a family without region mapping (runner)",
        lambda f: _runner("01", "-p", "model", _model_folder(f, "cohere2_vision"))(f),
        ("01_discovery", "needs region analyses", "cohere2_vision has no region mapping"),
    ),
    Case(
        "model before loading",
        "card head-set: head out of range",
        lambda f: _card(heads=[_head_file(f, [[0, 16], [3, 4]])])(f),
        ("heads=", "my_heads.json", "heads 0..15"),
    ),
    Case(
        "model before loading",
        "card head-set: string layer",
        lambda f: _card(heads=[_head_file(f, [["0", 1], [3, 4]])])(f),
        ("heads=", "my_heads.json", "'0' is not of type 'integer'"),
    ),
    Case(
        "model before loading",
        "card head-set: empty list",
        lambda f: _card(heads=[_head_file(f, [])])(f),
        ("heads=", "my_heads.json", "should be non-empty"),
    ),
    Case(
        "model before loading",
        "card head-set: not a file",
        _card(heads=["/no/such/heads.json"]),
        ("heads='/no/such/heads.json'", "is not a file"),
    ),
]


def _runner(*argv):
    def call(f: Folders):
        run.main([*argv, "--out", str(f.out / "run"), "-p", "cache_dir", str(f.cache / "results")])

    return call


RUNNER = [
    Case("runner", "k above the head count", _runner("01", "-p", "k", "129"), ("01_discovery", "k=129", TOY_HEADS)),
    Case("runner", "device cuda", _runner("01", "-p", "device", "cuda"), ("device='cuda'", "no CUDA GPU")),
    Case("runner", "dtype fp8", _runner("01", "-p", "dtype", "fp8"), ("dtype='fp8'", "float32")),
    Case("runner", "n_strips 1", _runner("01", "-p", "n_strips", "1"), ("n_strips=1", "int >= 2")),
    Case(
        "runner",
        "bad corpus for 03",
        _runner("03", "-p", "eval_corpus", "/no/such"),
        ("03_cers", "eval_corpus='/no/such'", "'cm', 'co'"),
    ),
    Case(
        "runner",
        "offline hub id",
        _runner("01", "-p", "model", "org/not-cached"),
        ("model='org/not-cached'", "HF_HUB_OFFLINE"),
    ),
    Case("runner", "unknown parameter", _runner("01", "-p", "n_itemz", "3"), ("['n_itemz']", "known:")),
    Case(
        "runner",
        "--out and -p out_dir disagree",
        lambda f: run.main(["00", "--out", str(f.tmp / "a"), "-p", "out_dir", str(f.tmp / "b")]),
        ("--out", "-p out_dir", "two run folders"),
    ),
    Case(
        "runner",
        "--out an existing file",
        lambda f: run.main(["00", "--out", _a_file(f)]),
        ("--out", "a_file", "existing file, not a folder"),
    ),
    Case(
        "runner",
        "--out not writable",
        lambda f: run.main(["00", "--out", "/proc/1/run"]),
        ("--out /proc/1/run", "not writable"),
    ),
    Case(
        "runner",
        "report card --method unknown",
        lambda f: protocol.main(["--model", "toy", "--method", "gazer", "--out", str(f.out / "run")]),
        ("method 'gazer'", "gaze, ver, localization, sparsemm, ocr, retrieval, qrhead, ablation, attribution"),
    ),
    Case(
        "runner",
        "k_crossover above (02)",
        _runner("02", "-p", "k_crossover", "999"),
        ("02_overlap", "k_crossover=999", TOY_HEADS),
    ),
]


def _headset(f: Folders, **changes) -> Path:
    record = {"model": "toy", "setting": "cm-ord-last", "selection": "flat top-k", "k": 2, "n_layers": 8,
              "n_heads": 16, "heads": [[0, 1], [3, 4]], "scores": [0.2, 0.1]}  # fmt: skip
    record.update(changes)
    path = f.tmp / "cm-ord-last.json"
    path.write_text(json.dumps(record))
    return path


def _load(**changes):
    return lambda f: headsets.load(_headset(f, **changes))


HEADSETS = [
    Case(
        "head-set files",
        "duplicate head",
        _load(heads=[[0, 1], [0, 1]]),
        ("cm-ord-last.json", "heads[1] = [0, 1]", "listed twice"),
    ),
    Case("head-set files", "empty list", _load(heads=[], k=0), ("cm-ord-last.json", "'heads'", "non-empty list")),
    Case(
        "head-set files",
        "boolean index",
        _load(heads=[[True, 1], [3, 4]]),
        ("heads[0] = [True, 1]", "booleans and floats are refused"),
    ),
    Case(
        "head-set files",
        "float index",
        _load(heads=[[0, 1.0], [3, 4]]),
        ("heads[0] = [0, 1.0]", "[layer, head] pair of integers"),
    ),
    Case(
        "head-set files", "string index", _load(heads=[["0", "1"], [3, 4]]), ("heads[0] = ['0', '1']", "e.g. [3, 7]")
    ),
    Case(
        "head-set files",
        "triple entry",
        _load(heads=[[0, 1, 2], [3, 4]]),
        ("heads[0] = [0, 1, 2]", "[layer, head] pair"),
    ),
    Case("head-set files", "k disagrees", _load(k=5), ("'k' is 5", "lists 2 heads", "make them agree")),
    Case("head-set files", "layer out of range", _load(heads=[[8, 1], [3, 4]]), ("heads[0] = [8, 1]", "layers 0..7")),
    Case("head-set files", "head out of range", _load(heads=[[0, 16], [3, 4]]), ("heads[0] = [0, 16]", "heads 0..15")),
    Case("head-set files", "negative index", _load(heads=[[-1, 1], [3, 4]]), ("heads[0] = [-1, 1]", "out of range")),
    Case(
        "head-set files",
        "another model's shape",
        lambda f: headsets.load(_headset(f), shape=(3, 4)),
        ("8 layers x 16 heads", "3 x 4", "rerun 01_discovery"),
    ),
    Case(
        "head-set files",
        "another model (load_settings)",
        lambda f: (_headset(f), headsets.load_settings(f.tmp, ["cm-ord-last"], "other/model", 8, 16)),
        ("'toy'", "'other/model'", "rerun 01_discovery"),
    ),
    Case(
        "head-set files",
        "not JSON",
        lambda f: (f.tmp / "x.json").write_text("{oops") and headsets.load(f.tmp / "x.json"),
        ("x.json", "not a readable head-set JSON"),
    ),
    Case(
        "head-set files",
        "missing keys",
        lambda f: (f.tmp / "x.json").write_text("{}") and headsets.load(f.tmp / "x.json"),
        ("x.json", "lacks", "'heads'"),
    ),
    Case("head-set files", "n_heads not an int", _load(n_heads="16"), ("n_heads='16'", "positive integers")),
]


def _load_model(name="toy", **kwargs):
    return lambda f: load_model(name, **kwargs)


LOAD_MODEL = [
    Case("load_model", "dtype int8", _load_model(dtype="int8"), ("dtype 'int8'", "float32")),
    Case("load_model", "device cuda without GPU", _load_model(device="cuda"), ("device 'cuda'", "no CUDA GPU")),
    Case("load_model", "device mps without MPS", _load_model(device="mps"), ("device 'mps'", "no Apple MPS")),
    Case("load_model", "device tpu", _load_model(device="tpu"), ("device 'tpu'", "'cpu', 'cuda'")),
    Case("load_model", "offline hub id", _load_model("org/not-cached"), ("model 'org/not-cached'", "HF_HUB_OFFLINE")),
    Case(
        "load_model",
        "not a model name",
        _load_model("not a model!"),
        ("model 'not a model!'", "hub id like 'org/name'"),
    ),
]


@pytest.fixture(scope="module")
def tiny():
    lm = wrap_model(tiny_model("qwen3_vl", ATTENTION))
    return lm, tiny_inputs("qwen3_vl", lm.model)


def _engine(make):
    """An engine call on the tiny Qwen3-VL; `make(lm, inputs, T, L, H)` runs it."""

    def call(f: Folders):
        lm, inputs = ENGINE_MODEL["tiny"]
        T, L, H = inputs["input_ids"].shape[1], len(lm.adapter.candidate_layers), lm.adapter.n_heads
        return make(lm, inputs, T, L, H)

    return call


def _probe(lm, inputs, **kwargs):
    with probe(lm, **kwargs):
        lm.model(**inputs)


def _run(lm, inputs, keys=None, **changed):
    """run_head_sets on the batch's second item (17 positions) with two head-sets, the image hidden, `changed`
    arguments given instead; `keys` changes the image's keys."""
    item = _second_row(inputs)
    image = lm.adapter.image_positions(item["input_ids"])
    L, H = len(lm.adapter.candidate_layers), lm.adapter.n_heads
    arguments = dict(heads=_heads(L, H), keys=image if keys is None else keys(image), bias=HIDE) | changed
    return run_head_sets(lm, item, **arguments)


def _heads(L, H, rows=2):
    heads = torch.zeros(rows, L, H, dtype=torch.bool)
    heads[:, 1, 0] = True
    return heads


ENGINE = [
    Case(
        "engine",
        "head out of range",
        _engine(lambda lm, i, T, L, H: heads_to_mask(lm.adapter, [(0, 99)])),
        ("head (0, 99)", "heads 0..3"),
    ),
    Case(
        "engine",
        "layer out of range",
        _engine(lambda lm, i, T, L, H: heads_to_mask(lm.adapter, [(L, 0)])),
        ("head (3, 0)", "layers 0..2"),
    ),
    Case(
        "engine",
        "heads wrong shape",
        _engine(
            lambda lm, i, T, L, H: _probe(
                lm,
                i,
                intervene=Intervention(
                    heads=torch.ones(2, L, H + 1, dtype=torch.bool), keys=torch.ones(2, T, dtype=torch.bool), bias=1.0
                ),
            )
        ),
        ("shape (2, 3, 5)", "3 candidate layers, 4 heads"),
    ),
    Case(
        "engine",
        "heads not bool",
        _engine(
            lambda lm, i, T, L, H: _probe(
                lm,
                i,
                intervene=Intervention(heads=torch.ones(2, L, H), keys=torch.ones(2, T, dtype=torch.bool), bias=1.0),
            )
        ),
        ("Intervention.heads", "bool tensor [batch, layers, heads]"),
    ),
    Case(
        "engine",
        "bias NaN",
        _engine(
            lambda lm, i, T, L, H: _probe(
                lm,
                i,
                intervene=Intervention(heads=_heads(L, H), keys=torch.ones(2, T, dtype=torch.bool), bias=float("nan")),
            )
        ),
        ("nan", "without NaN/+inf"),
    ),
    Case(
        "engine",
        "bias +inf",
        _engine(
            lambda lm, i, T, L, H: _probe(
                lm,
                i,
                intervene=Intervention(heads=_heads(L, H), keys=torch.ones(2, T, dtype=torch.bool), bias=float("inf")),
            )
        ),
        ("inf", "a float, HIDE or a [2] tensor"),
    ),
    Case(
        "engine",
        "keys select nothing",
        _engine(
            lambda lm, i, T, L, H: _probe(
                lm, i, intervene=Intervention(heads=_heads(L, H), keys=torch.zeros(2, T, dtype=torch.bool), bias=HIDE)
            )
        ),
        ("Intervention.keys", "selects no position in batch row(s) [0, 1]"),
    ),
    Case(
        "engine",
        "keys not bool",
        _engine(
            lambda lm, i, T, L, H: _probe(
                lm, i, intervene=Intervention(heads=_heads(L, H), keys=torch.ones(2, T), bias=HIDE)
            )
        ),
        ("Intervention.keys", "bool tensor [batch, positions]"),
    ),
    Case(
        "engine",
        "rows a wrong string",
        _engine(
            lambda lm, i, T, L, H: _probe(
                lm,
                i,
                intervene=Intervention(
                    heads=_heads(L, H), keys=torch.ones(2, T, dtype=torch.bool), bias=1.0, query_rows="some"
                ),
            )
        ),
        ("query_rows='some'", "'all'"),
    ),
    Case(
        "engine",
        "read without groups",
        _engine(lambda lm, i, T, L, H: _probe(lm, i, read=Read(query_rows="all", groups={}))),
        ("Read.groups is empty", "{'image': image_keys}"),
    ),
    Case(
        "engine",
        "read group batch mismatch",
        _engine(
            lambda lm, i, T, L, H: _probe(
                lm,
                i,
                read=Read(
                    query_rows=torch.ones(3, T, dtype=torch.bool), groups={"g": torch.ones(2, T, dtype=torch.bool)}
                ),
            )
        ),
        ("disagree on the batch size", "[2, 3]"),
    ),
    Case(
        "engine",
        "probe without read or intervene",
        _engine(lambda lm, i, T, L, H: _probe(lm, i)),
        ("probe needs", "read=..., intervene=..."),
    ),
    Case(
        "engine",
        "run_head_sets keys one position short",
        _engine(lambda lm, i, T, L, H: _run(lm, i, keys=lambda keys: keys[:, 1:])),
        ("keys is 16 positions wide, but the item has 17",),
    ),
    Case(
        "engine",
        "run_head_sets query_rows from a longer item",
        _engine(lambda lm, i, T, L, H: _run(lm, i, query_rows=torch.ones(1, T + 2, dtype=torch.bool))),
        ("query_rows is 19 positions wide, but the item has 17",),
    ),
    Case(
        "engine",
        "run_head_sets bias of n + 1 values",
        _engine(lambda lm, i, T, L, H: _run(lm, i, bias=torch.zeros(3))),
        ("bias=tensor([0., 0., 0.]) ((3,))", "a tensor of 2 floats, one per head-set"),
    ),
    Case(
        "engine",
        "run_head_sets bias a string",
        _engine(lambda lm, i, T, L, H: _run(lm, i, bias="hide")),
        ("bias='hide'", "use a float or HIDE"),
    ),
    Case(
        "engine",
        "run_head_sets zero head-sets",
        _engine(lambda lm, i, T, L, H: _run(lm, i, heads=torch.zeros(0, L, H, dtype=torch.bool))),
        ("heads holds no head-set", "pass at least one"),
    ),
    Case(
        "engine",
        "run_head_sets logits_to_keep -1",
        _engine(lambda lm, i, T, L, H: _run(lm, i, logits_to_keep=-1)),
        ("logits_to_keep=-1", "from 0 (every position's logits) to the item's 17 positions"),
    ),
    Case(
        "engine",
        "run_head_sets max_tokens 0",
        _engine(lambda lm, i, T, L, H: _run(lm, i, max_tokens=0)),
        ("max_tokens=0", "a whole number >= 1"),
    ),
]
ENGINE_MODEL = {}

CASES = PARAMETERS + BEFORE_LOADING + RUNNER + HEADSETS + LOAD_MODEL + ENGINE


@pytest.mark.parametrize("case", CASES, ids=[f"{c.category}: {c.name}" for c in CASES])
def test_bad_input_is_refused_before_any_work(case, tmp_path, monkeypatch, tiny):
    ENGINE_MODEL["tiny"] = tiny
    _no_gpu(monkeypatch)
    # offline, except the case that checks how an unreachable hub is named (port 9 refuses at once)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", "online mode" not in case.name)
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", "https://127.0.0.1:9")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(paths, "FINGERPRINTS", tmp_path / "fingerprints.json")
    folders = Folders(tmp=tmp_path, out=tmp_path / "out", cache=tmp_path / "cache")
    folders.out.mkdir()
    folders.cache.mkdir()
    calls = []
    real = torch.nn.Module.__call__
    monkeypatch.setattr(
        torch.nn.Module, "__call__", lambda m, *a, **k: calls.append(type(m).__name__) or real(m, *a, **k)
    )
    with pytest.raises((ValueError, FileNotFoundError, SystemExit)) as error:
        case.call(folders)
    message = str(error.value)
    missing = [fragment for fragment in case.fragments if fragment not in message]
    assert not missing, f"{missing} not in: {message}"
    assert calls == [], f"forward passes before the refusal: {calls[:5]}"
    assert list(folders.out.iterdir()) == [] and list(folders.cache.iterdir()) == []
    assert not paths.FINGERPRINTS.exists()


def test_the_catalogue_covers_every_category():
    counts = {}
    for case in CASES:
        counts[case.category] = counts.get(case.category, 0) + 1
    categories = {"parameters", "model before loading", "runner", "head-set files", "load_model", "engine"}
    assert len(CASES) >= 60 and set(counts) == categories
    print(counts, len(CASES))


def test_a_csv_corpus_and_auto_device_are_accepted(tmp_path, monkeypatch):
    _no_gpu(monkeypatch)
    folders = Folders(tmp=tmp_path, out=tmp_path / "out", cache=tmp_path / "cache")
    csv_path = _csv(
        folders, "path,label\n" + "".join(f"pics/{c}/0.png,{c}\n" for c in ("cat", "dog", "car", "cup", "tree"))
    )
    checked = params.validate({"eval_corpus": csv_path, "device": "auto", "dtype": "auto", "k": 128})
    assert (checked.eval_corpus, checked.device, checked.dtype, checked.k) == (csv_path, "cpu", "float32", 128)


def test_runner_refusals_come_before_papermill_and_torch(tmp_path):
    """An unknown -p name and a bad --out are refused in a process that has imported neither papermill nor torch."""
    import subprocess
    import sys

    _a_file(Folders(tmp=tmp_path, out=tmp_path, cache=tmp_path))
    for argv in (["01", "-p", "n_itemz", "3"], ["00", "--out", str(tmp_path / "a_file")]):
        script = (
            "import sys\nfrom helpers import run\ntry:\n    run.main(sys.argv[1:])\nexcept SystemExit as e:\n"
            "    print(e)\nprint(sorted({'papermill', 'torch'} & set(sys.modules)))"
        )
        done = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True, cwd=paths.ROOT)
        message, imported = done.stdout.strip().splitlines()[-2:]
        assert ("n_itemz" in message or "existing file" in message) and imported == "[]", done.stdout + done.stderr
