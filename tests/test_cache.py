import ast
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import helpers.storage.cache as cache_module
from helpers.measures import discovery, head_mass, necessity, set_chunks, steering
from helpers.measures.methods import cached as methods
from helpers.stimuli.pointing import SYNTHETIC
from helpers.storage.cache import ResultCache, cache_key
from helpers.storage.code_hash import _decides_results, _project_imports, code_version, project_root
from helpers.studies.cross_model import pointing


def test_key_ignores_dict_order_and_separates_values():
    assert cache_key({"a": 1, "b": [1, 2]}) == cache_key({"b": [1, 2], "a": 1})
    assert cache_key({"a": 1}) != cache_key({"a": 2})
    with pytest.raises(TypeError, match="object"):
        cache_key({"a": object()})


def test_round_trip_and_no_temp_files(tmp_path):
    cache = ResultCache(tmp_path)
    arrays = {"scores": np.arange(12, dtype=np.float32).reshape(3, 4), "ids": np.array([3, 1, 2])}
    path = cache.save("disc", {"setting": "cm-ord-last"}, arrays)
    loaded = cache.load("disc", {"setting": "cm-ord-last"})
    assert set(loaded) == {"scores", "ids"}
    np.testing.assert_array_equal(loaded["scores"], arrays["scores"])
    assert loaded["scores"].dtype == np.float32
    assert [p.name for p in path.parent.iterdir()] == [path.name]
    assert cache.load("disc", {"setting": "co-ord-last"}) is None


def test_object_arrays_are_refused(tmp_path):
    with pytest.raises(TypeError, match="pickle"):
        ResultCache(tmp_path).save("x", {}, {"bad": np.array([{"a": 1}], dtype=object)})


def test_corrupt_entry_is_detected_and_recomputed(tmp_path):
    cache = ResultCache(tmp_path)
    path = cache.save("x", {"n": 1}, {"v": np.ones(1000)})
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # truncated, as by a crash
    assert cache.load("x", {"n": 1}) is None
    assert not path.exists()
    calls = []
    out = cache.get_or_compute("x", {"n": 1}, lambda: calls.append(1) or {"v": np.full(3, 7.0)})
    assert calls == [1] and out["v"].tolist() == [7.0, 7.0, 7.0]
    assert cache.get_or_compute("x", {"n": 1}, lambda: calls.append(1) or {})["v"].sum() == 21.0
    assert calls == [1]


def test_garbage_bytes_are_detected(tmp_path):
    cache = ResultCache(tmp_path)
    path = cache.path("x", {})
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a zip file at all")
    assert cache.load("x", {}) is None


def test_chunks_resume_after_a_crash(tmp_path):
    cache = ResultCache(tmp_path)
    computed = []

    def compute(start, stop):
        computed.append((start, stop))
        if start == 4 and len(computed) == 2:
            raise RuntimeError("killed midway")
        return {"item": np.arange(start, stop), "sq": np.arange(start, stop) ** 2}

    with pytest.raises(RuntimeError):
        cache.cached_chunks("c", {"seed": 0}, n_items=10, chunk_size=4, compute=compute)
    assert computed == [(0, 4), (4, 8)]
    out = cache.cached_chunks("c", {"seed": 0}, n_items=10, chunk_size=4, compute=compute)
    assert computed == [(0, 4), (4, 8), (4, 8), (8, 10)]  # chunk 0 came from disk
    assert out["item"].tolist() == list(range(10)) and out["sq"][-1] == 81
    cache.cached_chunks("c", {"seed": 0}, n_items=10, chunk_size=4, compute=compute)
    assert len(computed) == 4  # a full rerun computes nothing


HEAD_SETS = np.zeros((2, 2, 2), dtype=bool)
TASK = SYNTHETIC["counting"]
# Every cached computation, by the name of its entries: a call of its run on a model `lm` and a cache.
CACHED_COMPUTATIONS = {
    "clean": lambda lm, cache: set_chunks.clean_run(lm, "grid", "co", 4, 0, cache),
    "necessity": lambda lm, cache: necessity.necessity_run(lm, "co", 4, 0, HEAD_SETS, "all", cache),
    "steering": lambda lm, cache: steering.steering_run(lm, "co", 4, 0, HEAD_SETS, 1.0, "all", cache),
    "discovery": lambda lm, cache: discovery.discover(lm, "co", "ord", 4, 0, cache),
    "head_mass": lambda lm, cache: head_mass.mass_run(lm, "co", "grid", 4, 0, "prompt", cache),
    "pointing_audit": lambda lm, cache: pointing.task_audit_run(lm, TASK, 4, 0, cache),
    "pointing_steering": lambda lm, cache: pointing.task_steering_run(lm, TASK, 4, 0, HEAD_SETS, 1.0, cache),
    "pointing_necessity": lambda lm, cache: pointing.task_necessity_run(lm, TASK, 4, 0, HEAD_SETS, cache),
    "methods": lambda lm, cache: methods.method_run(lm, "retrieval", 4, 0, cache),
}


class _Asked(Exception):
    def __init__(self, name: str, key: dict):
        super().__init__(name)
        self.name, self.key = name, key


class _KeyRecorder:
    """A cache that stops a run at the first entry it asks for, with that entry's name and key."""

    def cached_chunks(self, name, params, *args, **kwargs):
        raise _Asked(name, params)

    get_or_compute = cached_chunks


def _fake_lm(name="fake/model-a", dtype=torch.float32, device="cpu", processor='{"size": 224}'):
    """What a run reads of a model before it computes anything (a name not on this machine is its fingerprint; the
    processor's configuration, its to_json_string)."""
    return SimpleNamespace(
        name=name,
        model=SimpleNamespace(dtype=dtype, device=torch.device(device)),
        processor=SimpleNamespace(to_json_string=lambda: processor),
    )


def _asked(name: str, lm) -> _Asked:
    with pytest.raises(_Asked) as asked:
        CACHED_COMPUTATIONS[name](lm, _KeyRecorder())
    return asked.value


@pytest.mark.parametrize("name", sorted(CACHED_COMPUTATIONS))
def test_every_cached_computation_keys_model_processor_dtype_device_code_and_runtime(name, monkeypatch):
    asked = _asked(name, _fake_lm())
    assert asked.name == name
    assert _asked(name, _fake_lm(name="fake/model-b")).key != asked.key
    assert _asked(name, _fake_lm(processor='{"size": 448}')).key != asked.key
    assert _asked(name, _fake_lm(dtype=torch.bfloat16)).key != asked.key
    assert _asked(name, _fake_lm(device="cuda")).key != asked.key
    assert asked.key["runtime"] == cache_module.runtime_versions() and set(asked.key["runtime"]) == {
        "torch",
        "transformers",
    }
    monkeypatch.setattr(cache_module, "runtime_versions", lambda: {"torch": "9.9", "transformers": "9.9"})
    assert _asked(name, _fake_lm()).key != asked.key
    monkeypatch.setattr(cache_module, "code_version", lambda module, root=None: "edited")
    assert _asked(name, _fake_lm()).key != asked.key


def test_code_version_refuses_a_module_that_does_not_exist():
    with pytest.raises(ValueError, match="'helpers.measures.no_such' is not a module of the project"):
        code_version("helpers.measures.no_such")


def test_methods_key_holds_the_code_that_builds_the_items():
    """The methods' key follows cached.py (which builds the strips) and every method's module, not a description."""
    used = _project_imports(methods.__name__)
    assert {methods.__name__, "helpers.measures.methods.gaze", "helpers.stimuli.corpora"} <= used
    assert "items" not in _asked("methods", _fake_lm()).key["params"]


def test_every_cached_computation_is_listed():
    """Every ResultCache entry named in helpers/ (the first argument of cached_chunks or get_or_compute, a
    string; the engine's in-memory memos pass a model) belongs to a computation in CACHED_COMPUTATIONS."""
    named = set()
    for path in Path(cache_module.__file__).parents[1].rglob("*.py"):  # all of helpers/
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("cached_chunks", "get_or_compute")
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                named.add(node.args[0].value)
    assert named == set(CACHED_COMPUTATIONS)


ANALYSIS = '''"""An analysis."""

from lab.maths import double
from lab.store import keep

from .shift import offset


def run(x):
    return keep(double(x) + offset())  # the result
'''


def _fake_project(root):
    """A project of package `lab`: `lab.analysis` uses lab.maths (absolute import), lab.shift (relative) and
    lab.store (which decides only where results are kept); lab.unused is imported by nothing."""
    (root / "pyproject.toml").write_text("[project]\nname = 'lab'\n")
    package = root / "lab"
    package.mkdir()
    (package / "__init__.py").write_text('"""The lab."""\n')
    (package / "analysis.py").write_text(ANALYSIS)
    (package / "maths.py").write_text("def double(x):\n    return 2 * x\n")
    (package / "shift.py").write_text("def offset():\n    return 1\n")
    (package / "store.py").write_text("DECIDES_RESULTS = False\n\n\ndef keep(value):\n    return value\n")
    (package / "unused.py").write_text("Y = 2\n")


def _edit(path, old, new):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_code_version_survives_moves_and_follows_code(tmp_path):
    _fake_project(tmp_path)
    lab = tmp_path / "lab"
    assert project_root(lab) == tmp_path
    base = code_version("lab.analysis", tmp_path)

    _edit(lab / "analysis.py", "An analysis.", "Another docstring.")
    _edit(lab / "analysis.py", "# the result", "# a comment")
    assert code_version("lab.analysis", tmp_path) == base  # docstrings and comments do not count

    (lab / "numeric").mkdir()
    (lab / "numeric" / "__init__.py").write_text('"""Numbers."""\n')
    shutil.move(lab / "maths.py", lab / "numeric" / "arithmetic.py")  # moved and renamed
    _edit(lab / "analysis.py", "from lab.maths import", "from lab.numeric.arithmetic import")
    (lab / "steps").mkdir()
    shutil.move(lab / "analysis.py", lab / "steps" / "analysis.py")  # the computation's own module moved
    _edit(lab / "steps" / "analysis.py", "from .shift import", "from ..shift import")
    assert code_version("lab.steps.analysis", tmp_path) == base

    _edit(lab / "store.py", "return value", "return value if value else value")
    _edit(lab / "unused.py", "Y = 2", "Y = 3")
    assert code_version("lab.steps.analysis", tmp_path) == base  # not deciding results, not imported

    _edit(lab / "numeric" / "arithmetic.py", "return 2 * x", "return x + x")
    edited = code_version("lab.steps.analysis", tmp_path)
    assert edited != base  # a used function's body

    _edit(lab / "shift.py", "return 1", "return 2")
    assert code_version("lab.steps.analysis", tmp_path) != edited  # followed through the relative import


def test_code_version_of_the_real_analyses_covers_the_engine():
    used = _project_imports("helpers.measures.necessity")
    assert {
        "helpers.engine.attention",
        "helpers.engine.inputs",
        "helpers.engine.loading",
        "helpers.stimuli.corpora",
    } <= used
    assert "helpers.measures.discovery" not in used and "helpers.figures" not in used
    root = project_root(Path(cache_module.__file__))
    adapters = {f"helpers.engine.adapters.{path.stem}" for path in (root / "helpers/engine/adapters").glob("*.py")}
    assert {name.removesuffix(".__init__") for name in adapters} <= used  # every family's module is engine code
    kept_only = {name for name in used if not _decides_results(name, root)}
    assert kept_only == {
        "helpers.engine.copy_hook",
        "helpers.engine.copy_ledger",
        "helpers.storage.cache",
        "helpers.storage.code_hash",
        "helpers.storage.files",
        "helpers.storage.ledger",
        "helpers.storage.paths",
        "helpers.storage.timers",
        "helpers.storage.workers",
    }


@torch.no_grad()
def test_results_do_not_depend_on_sets_per_forward():
    """sets_per_forward (copies per forward) is in no key: a run at any value reads another's results. So the
    letter probabilities it gives must agree at every value, for masking and steering at each row group, to far
    below the tables' resolution (the copies of one forward differ only in the order of floating-point sums: a few
    float32 steps, 1.2e-7 at P = 0.98)."""
    from helpers.engine import HIDE, build_batch, load_model
    from helpers.engine.mcq import letter_probs_under
    from helpers.measures.controls import layer_matched_sets, with_controls
    from helpers.stimuli.corpora import build_items, load_corpus

    lm = load_model("toy")
    batch = build_batch(lm.processor, build_items("single_matched", load_corpus("cm"), n=1, seed=0))
    head_set = np.zeros((8, 16), dtype=bool)
    head_set[[2, 4, 5, 6], [1, 3, 5, 7]] = True
    heads = torch.as_tensor(with_controls(head_set, layer_matched_sets(head_set, n=12, seed=0)))  # [13, 8, 16]
    for bias, rows in ((HIDE, "all"), (HIDE, "last"), (4.0, "prompt")):
        probs = {
            n: letter_probs_under(lm, batch, heads, batch.image_mask, bias, rows, sets_per_forward=n)
            for n in (64, 5, 1)
        }
        for n in (5, 1):
            torch.testing.assert_close(probs[n], probs[64], atol=1e-6, rtol=0, msg=f"{bias}, {rows}, {n} per forward")
