"""What identifies a model and a corpus in cache keys: file contents, config, processor, hub commit, not paths."""

import json
import shutil
from pathlib import Path

import huggingface_hub
import numpy as np
import pytest
from PIL import Image
from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor

from helpers.engine import load_model
from helpers.engine.model_files import model_fingerprint
from helpers.stimuli.corpora import corpus_identity, load_corpus
from helpers.storage import files, paths
from helpers.storage.cache import code_version
from tests.tiny_models import tiny_model


@pytest.fixture(autouse=True)
def fingerprint_index(tmp_path, monkeypatch):
    """Every test keeps its hash index in its own tmp folder and counts the files it hashes."""
    monkeypatch.setattr(paths, "FINGERPRINTS", tmp_path / "fingerprints.json")
    hashed = []
    real = files._hash_content
    monkeypatch.setattr(files, "_hash_content", lambda path: hashed.append(path.name) or real(path))
    return hashed


@pytest.fixture(scope="module")
def saved_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tiny_qwen3_vl")
    tiny_model("qwen3_vl", "sdpa").save_pretrained(folder)
    Qwen2VLImageProcessor(patch_size=16, merge_size=2, temporal_patch_size=2).save_pretrained(folder)
    return folder


def _copy(folder: Path, tmp_path: Path, name="model") -> Path:
    return Path(shutil.copytree(folder, tmp_path / name))


def test_fingerprint_hashes_each_file_once_and_follows_its_content(saved_folder, tmp_path, fingerprint_index):
    folder = _copy(saved_folder, tmp_path)
    lm = load_model(str(folder))
    assert lm.folder == folder.resolve()
    base = model_fingerprint(lm)
    assert sorted(fingerprint_index) == ["config.json", "generation_config.json", "model.safetensors",
                                         "preprocessor_config.json"]  # fmt: skip
    assert model_fingerprint(lm) == base and len(fingerprint_index) == 4  # remembered in the index
    weights = folder / "model.safetensors"
    size = weights.stat().st_size
    with weights.open("r+b") as handle:  # one byte in the middle of the weights: same size, new content
        handle.seek(size // 2)
        byte = handle.read(1)
        handle.seek(size // 2)
        handle.write(bytes([byte[0] ^ 1]))
    changed_weights = model_fingerprint(lm)
    assert changed_weights != base and weights.stat().st_size == size
    config = json.loads((folder / "config.json").read_text())
    config["text_config"]["rms_norm_eps"] = 1e-5
    (folder / "config.json").write_text(json.dumps(config))
    assert model_fingerprint(lm) not in (base, changed_weights)
    processor = folder / "preprocessor_config.json"
    before = model_fingerprint(lm)
    processor.write_text(processor.read_text().replace('"merge_size": 2', '"merge_size": 2 '))
    assert model_fingerprint(lm) != before  # processor files count too


def test_a_moved_copy_keeps_its_content_identity_but_not_its_name(saved_folder, tmp_path):
    first = model_fingerprint(load_model(str(_copy(saved_folder, tmp_path, "a"))))
    second = model_fingerprint(load_model(str(_copy(saved_folder, tmp_path, "b"))))
    assert first.split("#")[1] == second.split("#")[1] and first != second


def test_a_hub_id_is_keyed_by_its_cached_commit(saved_folder, tmp_path, monkeypatch):
    hub = tmp_path / "hub"
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = hub / "models--org--tiny-vl"
    shutil.copytree(saved_folder, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    lm = load_model("org/tiny-vl")
    assert lm.folder == repo / "snapshots" / commit
    fingerprint = model_fingerprint(lm)
    assert fingerprint.startswith("org/tiny-vl@0123456789ab#")
    other = "fedcba9876543210fedcba9876543210fedcba98"
    (repo / "snapshots" / commit).rename(repo / "snapshots" / other)
    (repo / "refs" / "main").write_text(other)
    moved = model_fingerprint(load_model("org/tiny-vl"))
    assert moved.startswith("org/tiny-vl@fedcba987654#") and moved.split("#")[1] == fingerprint.split("#")[1]


def test_the_toy_model_is_keyed_by_content():
    fingerprint = model_fingerprint(load_model("toy"))
    assert fingerprint.startswith("toy#") and len(fingerprint) == len("toy#") + 16


def _write_images(root: Path, labels: list[str]) -> None:
    rng = np.random.default_rng(0)
    for label in labels:
        (root / label).mkdir(parents=True)
        Image.fromarray(rng.integers(0, 255, size=(20, 20, 3), dtype=np.uint8)).save(root / label / "0.png")


def test_an_image_corpus_is_keyed_by_content_not_path(tmp_path, fingerprint_index):
    _write_images(tmp_path / "a" / "photos", ["cat", "dog", "car", "cup"])
    first = corpus_identity(load_corpus(tmp_path / "a" / "photos"))
    assert len(fingerprint_index) == 4
    shutil.copytree(tmp_path / "a" / "photos", tmp_path / "b" / "photos")
    assert corpus_identity(load_corpus(tmp_path / "b" / "photos")) == first  # moved: same key
    picture = tmp_path / "b" / "photos" / "cup" / "0.png"
    pixels = np.asarray(Image.open(picture)).copy()
    pixels[10, 10] ^= 1
    Image.fromarray(pixels).save(picture)
    assert corpus_identity(load_corpus(tmp_path / "b" / "photos")) != first  # one pixel changed
    (tmp_path / "a" / "photos" / "cup" / "0.png").rename(tmp_path / "a" / "photos" / "cup" / "1.png")
    assert corpus_identity(load_corpus(tmp_path / "a" / "photos")) != first  # a file renamed
    assert corpus_identity(load_corpus("co")) == "co"
    csv_path = tmp_path / "a" / "list.csv"
    csv_path.write_text("path,label\nphotos/cat/0.png,cat\nphotos/dog/0.png,dog\n")
    listed = corpus_identity(load_corpus(csv_path))
    csv_path.write_text("path,label\nphotos/cat/0.png,dog\nphotos/dog/0.png,cat\n")
    assert corpus_identity(load_corpus(csv_path)) != listed  # labels swapped


def test_class_folders_that_collide_are_refused(tmp_path):
    _write_images(tmp_path / "pics", ["hot_dog", "hot dog", "cat"])
    with pytest.raises(ValueError, match=r"class folders 'hot dog' and 'hot_dog' in .* both name the class 'hot dog'"):
        load_corpus(tmp_path / "pics")


def test_code_identity_follows_used_modules_not_docstrings():
    assert code_version("helpers.measures.steering") == code_version("helpers.measures.steering")
    # tests/test_cache.py edits a fake project; here: the analyses' keys cover the new identity helpers
    from helpers.storage.code_hash import _project_imports

    assert {"helpers.storage.files", "helpers.stimuli.corpora", "helpers.engine.loading"} <= _project_imports(
        "helpers.measures.discovery"
    )
