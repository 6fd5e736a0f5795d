"""The pointing suite: the 2x2 CERS apparatus over several task types, each a small registry entry.

Every task builds the same thing: four 64-px cells (A top left .. D bottom right) that are the four
options, a question whose query span picks the correct cell, and a fifth cell content outside the options
(the mismatched arm). What differs is how the cells and the question are made (`Task.cells`). From one
build come every stimulus the suite scores and audits:

    plain       the 2x2 grid and the question                      (CERS is measured here)
    oracle      the prompt also names the target cell              (leak audit: expect about 1)
    blank       a blank grey image, same prompt                    (leak audit: expect 0.25)
    matched     the correct cell alone, its four option texts      (leak audit: expect about 1)
    mismatched  the fifth, excluded cell alone, the same options   (leak audit: expect 0.25)

Synthetic tasks (SYNTHETIC) draw their cells here; converted tasks come from benchmark items on disk
(helpers/stimuli/pointing_convert.py) through the same `assemble`.
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw

from helpers.stimuli.corpora import (
    BLANK_GREY,
    COLOURS,
    GRID_CELL_NAMES,
    GRID_LAYOUT,
    LETTERS,
    PANEL_SIZE,
    SHAPES,
    Item,
    draw_shape,
    item_rng,
    options_block,
    paste_tiles,
    text_span,
)

VARIANTS = ("plain", "oracle", "blank", "matched", "mismatched")
# The leak audit: stimulus -> expected range of the mean P(correct) without intervention
EXPECTED = {"oracle": (0.8, 1.0), "blank": (0.15, 0.35), "matched": (0.8, 1.0), "mismatched": (0.15, 0.35)}


@dataclass(frozen=True)
class Cells:
    """One item's content: five cell images (four options, then the excluded one), their option texts,
    the question and the phrase of it that picks the correct cell."""

    tiles: list[Image.Image]  # 5 RGB images; [0:4] are cells A-D, [4] the mismatched arm's image
    texts: list[str]  # 5 option texts, in the same order
    question: str
    phrase: str  # a substring of question: the query span
    correct: int  # 0..3


@dataclass(frozen=True)
class Task:
    name: str
    family: str  # "synthetic" or "converted"
    shown: str  # what the model is shown and asked (Table 25)
    cells: Callable[[np.random.Generator, int], Cells]  # (rng, item index) -> Cells
    source: str = ""  # a converted task's file digest (part of cache keys); "" for a synthetic task


def assemble(task: Task, cells: Cells, variant: str, seed_key: tuple[int, ...]) -> Item:
    """The `variant` stimulus (VARIANTS) of one item's cells."""
    if variant not in VARIANTS:
        raise ValueError(f"pointing variant {variant!r} is not one of {VARIANTS}")
    c = cells.correct
    common = dict(corpus=task.name, options=tuple(cells.texts[:4]), correct=c, seed_key=seed_key)
    if variant in ("matched", "mismatched"):
        shown = cells.tiles[c] if variant == "matched" else cells.tiles[4]
        prompt = f"Which option does the image show? {options_block(cells.texts[:4])} Answer with the letter."
        return Item(
            kind=f"pointing_{variant}",
            image=shown,
            prompt=prompt,
            answer=LETTERS[c],
            query_span=text_span(prompt, "Which option"),
            boxes={"image": (0, 0, *shown.size)},
            target="image",
            labels=(cells.texts[c if variant == "matched" else 4],),
            **common,
        )
    image, boxes = paste_tiles(cells.tiles[:4], 2)
    if variant == "blank":
        image = Image.new("RGB", image.size, BLANK_GREY)
    hint = f" Hint: it is the {GRID_CELL_NAMES[c]} cell." if variant == "oracle" else ""
    prompt = f"{GRID_LAYOUT} {cells.question}{hint} Answer with the letter."
    return Item(
        kind=f"pointing_{variant}",
        image=image,
        prompt=prompt,
        answer=LETTERS[c],
        query_span=text_span(prompt, cells.phrase),
        boxes=dict(zip(LETTERS, boxes)),
        target=LETTERS[c],
        labels=tuple(cells.texts[:4]),
        **common,
    )


def task_items(task: Task, stop: int, seed: int, variant: str = "plain", start: int = 0) -> list[Item]:
    """Items start..stop-1 of `task`; item i is the same whatever the range and has the same cells in each variant."""
    return [
        assemble(task, task.cells(item_rng(seed, f"pointing-{task.name}", i), i), variant, (seed, i))
        for i in range(start, stop)
    ]


# --------------------------------------------------------------------------------------- synthetic cells


def _canvas(size: int = PANEL_SIZE) -> tuple[Image.Image, ImageDraw.ImageDraw]:
    image = Image.new("RGB", (size, size), (235, 235, 235))
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 0, size - 1, size - 1), outline=(40, 40, 40), width=2)
    return image, draw


def _objects(placed: list[tuple[str, str, float, float, float]]) -> Image.Image:
    """A cell with shapes (colour, shape, cx, cy, r) in cell-relative units (0..1)."""
    image, draw = _canvas()
    for colour, shape, cx, cy, r in placed:
        draw_shape(draw, shape, COLOURS[colour], cx * PANEL_SIZE, cy * PANEL_SIZE, r * PANEL_SIZE)
    return image


def _attribute(rng, index) -> Cells:
    """Five objects of distinct colours and shapes; the question asks for a colour."""
    colours = list(rng.choice(list(COLOURS), 5, replace=False))
    shapes = list(rng.choice(SHAPES, 5, replace=False))
    correct = int(rng.integers(4))
    phrase = f"something {colours[correct]}"
    return Cells(
        tiles=[_objects([(c, s, 0.5, 0.5, 0.3)]) for c, s in zip(colours, shapes)],
        texts=[f"{c} {s}" for c, s in zip(colours, shapes)],
        question=f"Which cell shows {phrase}?",
        phrase=phrase,
        correct=correct,
    )


def _counting(rng, index) -> Cells:
    """One to five copies of one shape and colour per cell; the question asks for a count."""
    colour, shape = rng.choice(list(COLOURS)), rng.choice(SHAPES)
    counts = [int(n) for n in rng.permutation(5) + 1]  # five distinct counts 1..5
    spots = [(0.28, 0.28), (0.72, 0.72), (0.72, 0.28), (0.28, 0.72), (0.5, 0.5)]
    correct = int(rng.integers(4))
    phrase = f"exactly {counts[correct]} {shape}s"
    return Cells(
        tiles=[_objects([(colour, shape, x, y, 0.13) for x, y in spots[:n]]) for n in counts],
        texts=[f"{n} {shape}s" for n in counts],
        question=f"Which cell shows {phrase}?",
        phrase=phrase,
        correct=correct,
    )


RELATIONS = {  # relation -> (first object's centre, second object's centre)
    "left of": ((0.27, 0.5), (0.73, 0.5)),
    "right of": ((0.73, 0.5), (0.27, 0.5)),
    "above": ((0.5, 0.27), (0.5, 0.73)),
    "below": ((0.5, 0.73), (0.5, 0.27)),
}


def _spatial(rng, index) -> Cells:
    """Two objects per cell in each of the four relations; the excluded cell shows them overlapping."""
    (c1, c2), (s1, s2) = rng.choice(list(COLOURS), 2, replace=False), rng.choice(SHAPES, 2, replace=False)
    relations = list(rng.permutation(list(RELATIONS)))
    tiles = [_objects([(c1, s1, *RELATIONS[r][0], 0.2), (c2, s2, *RELATIONS[r][1], 0.2)]) for r in relations]
    tiles.append(_objects([(c2, s2, 0.5, 0.5, 0.3), (c1, s1, 0.5, 0.5, 0.15)]))
    correct = int(rng.integers(4))
    phrase = f"the {c1} {s1} {relations[correct]} the {c2} {s2}"
    return Cells(
        tiles=tiles,
        texts=[f"{c1} {s1} {r} {c2} {s2}" for r in relations] + [f"{c1} {s1} on {c2} {s2}"],
        question=f"Which cell shows {phrase}?",
        phrase=phrase,
        correct=correct,
    )


def _text_cell(text: str) -> Image.Image:
    image, draw = _canvas()
    draw.text((PANEL_SIZE / 2, PANEL_SIZE / 2), text, fill=(20, 20, 20), anchor="mm", font_size=18)
    return image


def _arithmetic(rng, index) -> Cells:
    """A sum a+b written in each cell, five distinct values; the question asks for a value."""
    values = [int(v) for v in rng.choice(np.arange(2, 19), 5, replace=False)]
    sums = []
    for v in values:
        a = int(rng.integers(1, v))
        sums.append(f"{a}+{v - a}")
    correct = int(rng.integers(4))
    phrase = f"a sum equal to {values[correct]}"
    return Cells(
        tiles=[_text_cell(s) for s in sums],
        texts=sums,
        question=f"Which cell shows {phrase}?",
        phrase=phrase,
        correct=correct,
    )


def _retrieval(rng, index) -> Cells:
    """Five small scenes of two objects each, no object shared; the question names one scene's pair."""
    colours, shapes = rng.permutation(list(COLOURS))[:5], rng.permutation(SHAPES)[:5]
    pairs = [(f"{colours[i]} {shapes[i]}", f"{colours[(i + 1) % 5]} {shapes[(i + 2) % 5]}") for i in range(5)]
    tiles = [_objects([(*a.split(), 0.3, 0.35, 0.18), (*b.split(), 0.7, 0.65, 0.18)]) for a, b in pairs]
    correct = int(rng.integers(4))
    phrase = f"a {pairs[correct][0]} and a {pairs[correct][1]}"
    return Cells(
        tiles=tiles,
        texts=[f"{a} and {b}" for a, b in pairs],
        question=f"Which scene shows {phrase}?",
        phrase=phrase,
        correct=correct,
    )


SYNTHETIC = {
    task.name: task
    for task in (
        Task("attribute_identification", "synthetic", "Four objects; which cell shows a named colour.", _attribute),
        Task(
            "counting", "synthetic", "One to five copies of a shape per cell; which cell shows n of them.", _counting
        ),
        Task(
            "spatial_relation", "synthetic", "Two objects per cell in four relations; which cell shows one.", _spatial
        ),
        Task("arithmetic", "synthetic", "A written sum per cell; which cell's sum has a given value.", _arithmetic),
        Task("scene_retrieval", "synthetic", "Four two-object scenes; which scene holds a named pair.", _retrieval),
    )
}


def audit_task(probs_correct: dict[str, np.ndarray]) -> dict:
    """One task's leak-audit row from the mean P(correct) per variant: the values, the variants outside
    EXPECTED, and `passes`. A task that does not pass is flagged and not scored."""
    row = {variant: float(np.mean(probs_correct[variant])) for variant in EXPECTED}
    flagged = [v for v, (low, high) in EXPECTED.items() if not low <= row[v] <= high]
    return {**row, "flagged": ", ".join(flagged), "passes": not flagged}
