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


def test_code_version_tracks_source():
    def f():
        return 1

    def g():
        return 2

    assert code_version(f) == code_version(f) != code_version(g)
