"""The pointing suite: every registry task builds the 2x2 apparatus and its audit stimuli; the leak audit_task
flags a task outside the expected ranges; the benchmark converters on fixture items, and bad files."""

import json

import numpy as np
import pytest
from PIL import Image

from helpers.stimuli.corpora import BLANK_GREY, LETTERS
from helpers.stimuli.pointing import EXPECTED, SYNTHETIC, VARIANTS, audit_task, task_items
from helpers.stimuli.pointing_convert import BenchmarkError, converted_task


@pytest.mark.parametrize("name", sorted(SYNTHETIC))
def test_every_synthetic_task_builds_the_apparatus_in_every_variant(name):
    task = SYNTHETIC[name]
    by_variant = {v: task_items(task, 6, 3, v) for v in VARIANTS}
    for i in range(6):
        plain, oracle, blank = (by_variant[v][i] for v in ("plain", "oracle", "blank"))
        assert plain.image.size == (128, 128) and list(plain.boxes) == list(LETTERS)
        assert plain.answer == LETTERS[plain.correct] == plain.target
        assert plain.query_text in plain.prompt and plain.query_text in oracle.prompt
        assert len(set(plain.options)) == 4  # four distinct options
        assert "Hint" in oracle.prompt and "Hint" not in plain.prompt
        assert blank.image.getcolors() == [(128 * 128, BLANK_GREY)]
        matched, mismatched = by_variant["matched"][i], by_variant["mismatched"][i]
        assert matched.options == mismatched.options == plain.options and matched.correct == plain.correct
        assert matched.labels[0] == plain.options[plain.correct] and mismatched.labels[0] not in plain.options
        cell = plain.image.crop(plain.boxes[plain.target])
        assert np.array_equal(np.asarray(cell), np.asarray(matched.image))  # the matched arm is the correct cell
    assert len({item.correct for item in by_variant["plain"]}) > 1  # the correct cell varies


def test_a_range_of_items_is_the_same_items_as_the_slice_of_all():
    task = SYNTHETIC["spatial_relation"]
    for variant in ("plain", "mismatched"):
        whole, part = task_items(task, 7, 2, variant), task_items(task, 7, 2, variant, start=4)
        assert len(part) == 3
        for a, b in zip(whole[4:], part):
            assert a.prompt == b.prompt and a.correct == b.correct
            assert np.array_equal(np.asarray(a.image), np.asarray(b.image))


def test_the_question_picks_the_correct_cell_by_its_option_text():
    items = task_items(SYNTHETIC["counting"], 5, 0)
    for item in items:
        n = item.query_text.split()[1]  # "exactly <n> <shape>s"
        assert item.options[item.correct].startswith(f"{n} ")
    arithmetic = task_items(SYNTHETIC["arithmetic"], 5, 0)
    for item in arithmetic:
        value = int(item.query_text.split()[-1])
        assert [eval(option) for option in item.options].index(value) == item.correct  # noqa: S307 (a+b only)


def test_leak_audit_flags_variants_outside_their_ranges():
    good = {"oracle": [0.95, 1.0], "blank": [0.25, 0.3], "matched": [0.9, 1.0], "mismatched": [0.2, 0.3]}
    row = audit_task({k: np.array(v) for k, v in good.items()})
    assert row["passes"] and row["oracle"] == pytest.approx(0.975)
    row = audit_task(
        {**{k: np.array(v) for k, v in good.items()}, "blank": np.array([0.6]), "oracle": np.array([0.3])}
    )
    assert not row["passes"] and row["flagged"] == "oracle, blank"
    assert set(EXPECTED) == {"oracle", "blank", "matched", "mismatched"}


def _photo(path, colour):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (90, 70), colour).save(path)


def _write(folder, records):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "items.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return folder


def _overlay_fixture(tmp_path):
    _photo(tmp_path / "bench" / "img" / "1.png", (200, 30, 30))
    _photo(tmp_path / "bench" / "img" / "2.png", (30, 30, 200))
    dogs = {"id": "q1", "image": "img/1.png", "question": "How many dogs?", "options": ["2", "3", "4", "5"]}
    colour = {"id": "q2", "image": "img/2.png", "question": "What colour?", "options": ["red", "blue", "pink", "grey"]}
    return [{**dogs, "answer": "3"}, {**colour, "answer": "blue"}]


def test_same_image_overlay_converts_fixture_items(tmp_path):
    folder = _write(tmp_path / "bench", _overlay_fixture(tmp_path))
    task = converted_task("CountBenchQA", folder)
    assert task.name == "CountBenchQA_pointing" and task.family == "converted"
    plain, oracle = task_items(task, 2, 0)[0], task_items(task, 2, 0, "oracle")[0]
    assert plain.options == ("2", "3", "4", "5") and plain.correct == 1 and plain.answer == "B"
    assert plain.query_text == "How many dogs?" and "Hint" in oracle.prompt
    cells = [np.asarray(plain.image.crop(plain.boxes[letter])) for letter in LETTERS]
    assert all(not np.array_equal(cells[0], c) for c in cells[1:])  # each copy carries its own option text
    mismatched = task_items(task, 2, 0, "mismatched")[1]
    assert mismatched.options == ("red", "blue", "pink", "grey") and mismatched.labels == ("none of these",)


def test_image_retrieval_converts_fixture_items(tmp_path):
    for i, colour in enumerate([(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0)]):
        _photo(tmp_path / "scenes" / f"{i}.png", colour)
    record = {"id": "r1", "images": [f"{i}.png" for i in range(4)], "question": "the green scene", "answer": 1}
    task = converted_task("Spatial457", _write(tmp_path / "scenes", [record]))
    item = task_items(task, 1, 0)[0]
    assert item.correct == 1 and item.query_text == "the green scene"
    assert np.asarray(item.image.crop(item.boxes["B"]))[10, 10].tolist() == [0, 255, 0]


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda r: r[1].update(image="img/missing.png"), r"item 'q2' \(line 2\): image 'img/missing.png' not found"),
        (lambda r: r[0].update(answer="7"), r"item 'q1' \(line 1\): answer '7' is not among the options"),
        (lambda r: r[1].update(options=["red", "blue", "pink"]), r"item 'q2' \(line 2\): 3 options; .* exactly four"),
        (lambda r: r[1].update(id="q1"), r"item 'q1' \(line 2\): duplicate id"),
    ],
)
def test_a_bad_benchmark_file_names_the_item_and_the_file(tmp_path, change, message):
    records = _overlay_fixture(tmp_path)
    change(records)
    folder = _write(tmp_path / "bench", records)
    with pytest.raises(BenchmarkError, match=message) as error:
        converted_task("MMStar", folder)
    assert str(folder / "items.jsonl") in str(error.value)


def test_unknown_benchmark_and_missing_file_are_refused(tmp_path):
    with pytest.raises(BenchmarkError, match="no conversion recipe; known: countbenchqa"):
        converted_task("VQAv2", tmp_path)
    with pytest.raises(BenchmarkError, match="no benchmark file"):
        converted_task("MathVista", tmp_path / "nowhere")
