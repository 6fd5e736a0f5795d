"""Stimuli: determinism, geometry, answers consistent with the drawn classes, bad-input errors."""

import numpy as np
import pytest
from PIL import Image

from helpers.figures.stimuli import plot_example_stimuli
from helpers.stimuli.corpora import (
    BLANK_GREY,
    LETTERS,
    ImageFolderCorpus,
    SyntheticCorpus,
    grid_items,
    load_corpus,
    single_image_items,
    strip_items,
)
from helpers.toy.tasks import ALL_KINDS, build_task_items


def _fingerprint(item):
    return item.prompt, item.answer, item.labels, item.query_span, np.asarray(item.image).tobytes()


@pytest.mark.parametrize("kind", ALL_KINDS)
@pytest.mark.parametrize("corpus_name", ["cm", "co"])
def test_same_seed_same_items_other_seed_other_items(kind, corpus_name):
    corpus = SyntheticCorpus(corpus_name)
    first, again = build_task_items(kind, corpus, 4, seed=3), build_task_items(kind, corpus, 4, seed=3)
    other = build_task_items(kind, corpus, 4, seed=4)
    assert [_fingerprint(i) for i in first] == [_fingerprint(i) for i in again]
    assert [_fingerprint(i) for i in first] != [_fingerprint(i) for i in other]


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_boxes_inside_image_and_disjoint(kind):
    for item in build_task_items(kind, SyntheticCorpus("co"), 5, seed=0):
        width, height = item.image.size
        boxes = list(item.boxes.values())
        assert item.target in item.boxes
        assert len(boxes) == len(item.labels)
        for x0, y0, x1, y1 in boxes:
            assert 0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height
        for i, a in enumerate(boxes):
            for b in boxes[i + 1 :]:
                assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]
        assert item.query_text and item.prompt[item.query_span[0] : item.query_span[1]] == item.query_text


def test_strip_answers_and_query_spans():
    corpus = SyntheticCorpus("cm")
    for item in strip_items(corpus, 20, seed=1, query="ord"):
        panel = int(item.target.split()[1])
        assert item.answer == f"panel {panel} {item.labels[panel - 1]}" and item.query_text == f"panel {panel}"
        assert len(set(item.labels)) == 6 and item.image.size == (192, 128)
    for item in strip_items(corpus, 20, seed=1, query="ref"):
        panel = int(item.target.split()[1])
        assert (
            item.answer == f"{item.labels[panel - 1]} in panel {panel}"
            and item.query_text == f"the {item.labels[panel - 1]}"
        )


def test_grid_variants_share_the_question_and_blank_is_grey():
    corpus = SyntheticCorpus("cm")
    plain, oracle, blank = (grid_items(corpus, 10, 5, variant) for variant in ("plain", "oracle", "blank"))
    cell_names = ["top left", "top right", "bottom left", "bottom right"]
    for p, o, b in zip(plain, oracle, blank):
        assert p.labels == o.labels == b.labels and p.correct == o.correct == b.correct
        assert p.answer == LETTERS[p.correct] and p.query_text == f"the {p.labels[p.correct]}"
        assert f"it is the {cell_names[p.correct]} cell" in o.prompt and "Hint" not in p.prompt
        assert b.prompt == p.prompt and np.unique(np.asarray(b.image).reshape(-1, 3), axis=0).tolist() == [
            list(BLANK_GREY)
        ]
        assert p.image.size == (128, 128) and p.boxes["D"] == (64, 64, 128, 128)


def test_single_image_arms_are_paired():
    corpus = SyntheticCorpus("co")
    matched, mismatched, text = (single_image_items(corpus, 30, 2, arm) for arm in ("matched", "mismatched", "text"))
    for m, mm, t in zip(matched, mismatched, text):
        assert m.options == mm.options == t.options and m.correct == mm.correct == t.correct
        assert m.labels[0] == m.options[m.correct]
        assert mm.labels[0] not in mm.options and t.labels[0] not in t.options
        assert f"holds the {t.options[t.correct]}" in t.prompt
    letters = [m.correct for m in matched]
    assert len(set(letters)) == 4  # the correct letter varies over items


@pytest.mark.parametrize("kind", ["strip_ord", "grid", "single_mismatched"])
def test_synthetic_regions_share_no_colour_and_no_shape(kind):
    for item in build_task_items(kind, SyntheticCorpus("cm"), 30, seed=6):
        labels = list(item.labels) + [o for o in item.options if o not in item.labels]
        colours, shapes = zip(*(label.split(" ") for label in labels))
        assert len(set(colours)) == len(set(shapes)) == len(labels)


def test_options_follow_their_text():
    matched = single_image_items(SyntheticCorpus("cm"), 1, 3, "matched")[0]
    listed = ", ".join(f"{o} ({letter})" for o, letter in zip(matched.options, LETTERS))
    assert f"Options: {listed}." in matched.prompt


def _write_folder(root, counts):
    rng = np.random.default_rng(0)
    for label, count in counts.items():
        (root / label).mkdir(parents=True)
        for i in range(count):
            pixels = rng.integers(0, 255, size=(40, 50, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / label / f"{i}.png")


def test_image_folder_corpus_from_folders_and_csv(tmp_path):
    _write_folder(tmp_path / "photos", {"cat": 2, "dog": 1, "hot_dog": 1, "car": 1, "tree": 1, "cup": 2})
    corpus = load_corpus(tmp_path / "photos")
    assert corpus.labels == ("car", "cat", "cup", "dog", "hot dog", "tree")
    strip = strip_items(corpus, 2, seed=0, query="ord")[0]
    assert strip.image.size == (192, 128) and sorted(strip.labels) == sorted(corpus.labels)
    assert single_image_items(corpus, 1, 0, "mismatched")[0].labels[0] in corpus.labels
    csv_path = tmp_path / "list.csv"
    csv_path.write_text(
        "path,label\nphotos/cat/0.png,cat\nphotos/dog/0.png,dog\nphotos/car/0.png,car\nphotos/tree/0.png,tree\n"
    )
    from_csv = ImageFolderCorpus(csv_path)
    assert from_csv.labels == ("car", "cat", "dog", "tree")
    assert grid_items(from_csv, 1, 0)[0].image.size == (128, 128)


def test_bad_inputs_raise_clear_errors(tmp_path):
    corpus = SyntheticCorpus("cm")
    with pytest.raises(ValueError, match="n_panels=7 does not fit"):
        strip_items(corpus, 1, 0, "ord", n_panels=7, columns=3)
    with pytest.raises(ValueError, match="strip query 'where'"):
        strip_items(corpus, 1, 0, "where")
    with pytest.raises(ValueError, match="item kind 'nope'"):
        build_task_items("nope", corpus, 1, 0)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no images"):
        ImageFolderCorpus(tmp_path / "empty")
    (tmp_path / "one" / "cat").mkdir(parents=True)
    with pytest.raises(ValueError, match="class folder .*cat.* holds no images"):
        ImageFolderCorpus(tmp_path / "one")
    _write_folder(tmp_path / "few", {"cat": 1, "dog": 1, "car": 1})
    few = ImageFolderCorpus(tmp_path / "few")
    with pytest.raises(ValueError, match="needs at least 4 classes, corpus 'few' has 3"):
        grid_items(few, 1, 0)
    with pytest.raises(ValueError, match="needs at least 6 classes"):
        strip_items(few, 1, 0, "ord")
    (tmp_path / "few" / "cat" / "0.png").write_bytes(b"not an image")
    with pytest.raises(ValueError, match="cannot read image .*0.png.* of class 'cat'"):
        few.tile("cat", np.random.default_rng(0))
    with pytest.raises(ValueError, match="neither a folder nor a .csv"):
        ImageFolderCorpus(tmp_path / "missing")


def test_example_stimuli_figure_is_written(tmp_path):
    from helpers.figures import save_figure

    paths = save_figure(plot_example_stimuli(seed=0), "example_stimuli", tmp_path)
    assert [p.name for p in paths] == ["example_stimuli.png", "example_stimuli.pdf"]
    assert all(p.stat().st_size > 10_000 for p in paths)
