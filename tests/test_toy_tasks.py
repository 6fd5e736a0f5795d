"""The toy model's training tasks: built from the paper's items, same images and classes, other questions."""

import numpy as np
import pytest

from helpers.stimuli import pointing
from helpers.stimuli.corpora import LETTERS, SyntheticCorpus, single_image_items, strip_items
from helpers.toy.tasks import POINTING_KINDS, TOY_KINDS, build_task_items, retarget


@pytest.mark.parametrize("kind", [kind for kind in TOY_KINDS if kind not in POINTING_KINDS])
def test_toy_tasks_keep_the_paper_items_images(kind):
    base_kind = {"strip": "strip_ord", "grid": "grid", "single": "single_matched", "option": "single_matched"}[
        kind.split("_")[0]
    ]
    for task, base in zip(
        build_task_items(kind, SyntheticCorpus("cm"), 4, 7), build_task_items(base_kind, SyntheticCorpus("cm"), 4, 7)
    ):
        assert task.kind == kind and task.labels == base.labels
        assert np.array_equal(np.asarray(task.image), np.asarray(base.image))
        assert task.query_text and task.prompt[task.query_span[0] : task.query_span[1]] == task.query_text


@pytest.mark.parametrize("kind", POINTING_KINDS)
def test_pointing_kinds_are_the_suites_items_its_tasks_in_turn(kind):
    items = build_task_items(kind, SyntheticCorpus("co"), 7, 10_003)
    tasks = list(pointing.SYNTHETIC.values())
    for i, item in enumerate(items):
        suite = pointing.task_items(tasks[i % 5], i + 1, 10_003, kind.removeprefix("pointing_"), start=i)[0]
        assert item.kind == kind and item.corpus == tasks[i % 5].name
        assert (item.prompt, item.answer, item.labels) == (suite.prompt, suite.answer, suite.labels)
        assert np.array_equal(np.asarray(item.image), np.asarray(suite.image))
    assert build_task_items(kind, SyntheticCorpus("cm"), 7, 10_003)[3].prompt == items[3].prompt  # no corpus


def test_strip_describe_lists_every_panel_in_order():
    described = build_task_items("strip_describe", SyntheticCorpus("cm"), 1, 1)[0]
    assert described.answer.split(" ")[:3] == ["1", *described.labels[0].split()]
    assert len(described.answer.split()) == 18
    assert described.labels == strip_items(SyntheticCorpus("cm"), 1, seed=1, query="ord")[0].labels


def test_name_and_recall_tasks():
    corpus = SyntheticCorpus("co")
    matched = single_image_items(corpus, 6, 2, "matched")
    for name, recall, base in zip(
        build_task_items("single_name", corpus, 6, 2), build_task_items("option_recall", corpus, 6, 2), matched
    ):
        assert name.answer == base.options[base.correct] and name.options == () and name.correct is None
        listed = [f"{o} ({letter})" for letter, o in zip(LETTERS, base.options)]
        assert recall.options == base.options and recall.prompt.startswith(f"Options: {', '.join(listed)}.")
        assert sorted(recall.answer.split(", ")) == sorted(listed)


def test_locate_tasks_list_every_object_with_its_place_in_alphabetical_order():
    strip = build_task_items("strip_locate", SyntheticCorpus("co"), 1, 3)[0]
    listed = [entry.rsplit(" in panel ", 1) for entry in strip.answer.split(", ")]
    assert [label for label, _ in listed] == sorted(strip.labels)
    assert all(strip.labels[int(panel) - 1] == label for label, panel in listed)
    grid = build_task_items("grid_locate", SyntheticCorpus("cm"), 1, 3)[0]
    assert grid.kind == "grid_locate" and grid.query_text == "every object"
    listed = [(entry[:-4], entry[-4:]) for entry in grid.answer.split(", ")]  # "blue ring", " (A)"
    assert [label for label, _ in listed] == sorted(grid.labels)
    assert all(f" ({LETTERS[grid.labels.index(label)]})" == letter for label, letter in listed)


def test_grid_describe_names_every_cell_with_its_letter():
    plain, described = (build_task_items(kind, SyntheticCorpus("co"), 5, 5) for kind in ("grid", "grid_describe"))
    for p, d in zip(plain, described):
        assert d.kind == "grid_describe" and d.labels == p.labels and d.query_text == "every cell"
        assert d.answer == " ".join(f"{letter} {label}" for letter, label in zip(LETTERS, p.labels))
        assert d.prompt.startswith("The image is a 2x2 grid: top left (A)")


@pytest.mark.parametrize("kind", ["strip_ord", "strip_ref", "grid", "grid_oracle"])
def test_retarget_asks_the_same_image_about_another_region(kind):
    item = build_task_items(kind, SyntheticCorpus("cm"), 1, seed=2)[0]
    for target in range(len(item.labels)):
        other = retarget(item, target)
        assert other.image is item.image and other.labels == item.labels
        assert other.target == list(item.boxes)[target]
        # a freshly built item asking about the same region has the same prompt, up to the class named
        fresh = next(i for i in build_task_items(kind, SyntheticCorpus("cm"), 40, seed=9) if i.target == other.target)
        assert other.prompt == fresh.prompt.replace(fresh.labels[target], item.labels[target])
        if kind == "strip_ord":
            assert (
                other.answer == f"panel {target + 1} {item.labels[target]}"
                and other.query_text == f"panel {target + 1}"
            )
        elif kind == "strip_ref":
            assert (
                other.answer == f"{item.labels[target]} in panel {target + 1}"
                and other.query_text == f"the {item.labels[target]}"
            )
        else:
            assert other.answer == LETTERS[target] == other.target and other.correct == target
    with pytest.raises(ValueError, match="cannot be retargeted"):
        retarget(build_task_items("text", SyntheticCorpus("cm"), 1, 0)[0], 0)
    with pytest.raises(ValueError, match="outside the item's"):
        retarget(item, len(item.labels))
