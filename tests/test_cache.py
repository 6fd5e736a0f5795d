import numpy as np
import pytest

from helpers.cache import ResultCache, cache_key, code_version


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


def _fake_project(root, steering_doc="Steering.", engine_code="X = 1"):
    package = root / "helpers"
    (package / "engine").mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "engine" / "__init__.py").write_text("from helpers.engine.attention import X\n")
    (package / "engine" / "attention.py").write_text(f'"""The engine."""\n{engine_code}  # a comment\n')
    (package / "steering.py").write_text(
        f'"""{steering_doc}"""\nfrom helpers.engine import X\n\n\ndef f():\n    return X\n'
    )
    (package / "stats.py").write_text("Y = 2\n")


def test_code_version_follows_imports_and_ignores_docstrings(tmp_path, monkeypatch):
    import helpers.cache as cache_module

    monkeypatch.setattr(cache_module, "_PROJECT_ROOT", tmp_path)

    def version():
        cache_module._project_imports.cache_clear()
        return code_version("helpers.steering")

    _fake_project(tmp_path)
    cache_module._project_imports.cache_clear()
    assert cache_module._project_imports("helpers.steering") == {
        "helpers",
        "helpers.steering",
        "helpers.engine",
        "helpers.engine.attention",
    }
    base = version()
    _fake_project(tmp_path, steering_doc="Another docstring.")
    assert version() == base  # docstrings and comments do not count
    (tmp_path / "helpers" / "stats.py").write_text("Y = 3\n")
    assert version() == base  # a module steering does not import
    _fake_project(tmp_path, engine_code="X = 2")
    assert version() != base  # an imported module's code changed


def test_code_version_of_the_real_analyses_covers_the_engine():
    from helpers.cache import _project_imports

    used = _project_imports("helpers.necessity")
    assert {"helpers.engine.attention", "helpers.engine.inputs", "helpers.engine.loading", "helpers.stimuli"} <= used
    assert "helpers.discovery" not in used and "helpers.figures" not in used
