"""Benchmark items on disk -> pointing-suite tasks, following the paper's conversion recipes (its Table 29).

A benchmark is a JSONL file (or a folder holding `items.jsonl`), one item per line, image paths relative
to the file. Two recipes:

- same-image overlay (CountBenchQA, CV-Bench, MathVista, MMStar): one photo and a four-option question,
      {"id": "q1", "image": "img/1.jpg", "question": "How many dogs?", "options": ["2", "3", "4", "5"],
       "answer": "3"}
  the four cells are copies of the photo, each with one option's text overlaid; the correct cell carries
  the answer. The mismatched arm's image is the photo with no option overlaid.
- image retrieval (Spatial457, SpatialRGPT-Bench): four images and a question that holds for one of them,
      {"id": "r1", "images": ["a.png", "b.png", "c.png", "d.png"], "question": "...", "answer": 2}
  (answer: the index of the image it holds for); the mismatched arm's image is a blank grey cell.

A bad file stops with an error naming the file and the item: a missing image, an answer not among the
options, fewer (or more) than four options or images, a duplicate id.
"""

import hashlib
import json
from pathlib import Path

from PIL import Image, ImageDraw

from helpers.stimuli.corpora import BLANK_GREY, PANEL_SIZE
from helpers.stimuli.pointing import Cells, Task

RECIPES = {
    "countbenchqa": "overlay",
    "cv-bench": "overlay",
    "mathvista": "overlay",
    "mmstar": "overlay",
    "spatial457": "retrieval",
    "spatialrgpt-bench": "retrieval",
}
QUESTION = "Which cell shows the correct answer?"
# what a converted task's four cells show, per recipe (Table 25's "shown and asked", Table 29's recipe)
SHOWN = {
    "overlay": "The photo four times, one option's text overlaid on each; the question in text.",
    "retrieval": "Four images; the question holds for one of them; the correct cell is that image.",
}


class BenchmarkError(ValueError):
    """A benchmark file that cannot be converted; the message names the file and the item."""


def _jsonl(source: Path) -> Path:
    path = source / "items.jsonl" if source.is_dir() else source
    if not path.is_file():
        raise BenchmarkError(f"{source}: no benchmark file (expected a .jsonl file or a folder with items.jsonl)")
    return path


def read_items(source: str | Path, recipe: str) -> list[dict]:
    """The checked items of one benchmark file, each with its images resolved and opened."""
    path = _jsonl(Path(source))
    items, seen = [], set()
    for line_no, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}, line {line_no}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise BenchmarkError(f"{where}: not JSON ({error})") from error
        item_id = record.get("id")
        where = f"{path}, item {item_id!r} (line {line_no})"
        if item_id is None:
            raise BenchmarkError(f"{where}: no 'id'")
        if item_id in seen:
            raise BenchmarkError(f"{where}: duplicate id")
        seen.add(item_id)
        items.append(
            _check_overlay(record, path, where) if recipe == "overlay" else _check_retrieval(record, path, where)
        )
    if not items:
        raise BenchmarkError(f"{path}: no items")
    return items


def _image(path: Path, name, where: str) -> Image.Image:
    file = path.parent / str(name)
    if not file.is_file():
        raise BenchmarkError(f"{where}: image {str(name)!r} not found ({file})")
    try:
        return Image.open(file).convert("RGB")
    except OSError as error:
        raise BenchmarkError(f"{where}: image {str(name)!r} cannot be read ({error})") from error


def _check_overlay(record: dict, path: Path, where: str) -> dict:
    options = record.get("options")
    if not isinstance(options, list) or len(options) != 4:
        count = len(options) if isinstance(options, list) else 0
        raise BenchmarkError(f"{where}: {count} options; the 2x2 apparatus needs exactly four")
    options = [str(o) for o in options]
    if len(set(options)) != 4:
        raise BenchmarkError(f"{where}: options {options} are not four distinct texts")
    if str(record.get("answer")) not in options:
        raise BenchmarkError(f"{where}: answer {record.get('answer')!r} is not among the options {options}")
    return {
        "id": record["id"],
        "question": str(record["question"]),
        "options": options,
        "correct": options.index(str(record["answer"])),
        "image": _image(path, record.get("image"), where),
    }


def _check_retrieval(record: dict, path: Path, where: str) -> dict:
    images = record.get("images")
    if not isinstance(images, list) or len(images) != 4:
        count = len(images) if isinstance(images, list) else 0
        raise BenchmarkError(f"{where}: {count} images; image retrieval needs exactly four")
    answer = record.get("answer")
    if not isinstance(answer, int) or not 0 <= answer < 4:
        raise BenchmarkError(f"{where}: answer {answer!r} is not the index (0-3) of one of the four images")
    return {
        "id": record["id"],
        "question": str(record["question"]),
        "options": [f"image {i + 1}" for i in range(4)],
        "correct": answer,
        "images": [_image(path, name, where) for name in images],
    }


def _cell(image: Image.Image, caption: str | None) -> Image.Image:
    """The image resized onto a cell, with `caption` written across its lower third."""
    cell = image.resize((PANEL_SIZE, PANEL_SIZE), Image.BILINEAR)
    if caption is not None:
        draw = ImageDraw.Draw(cell)
        draw.rectangle((0, PANEL_SIZE * 2 // 3, PANEL_SIZE, PANEL_SIZE), fill=(255, 255, 255))
        draw.text((PANEL_SIZE / 2, PANEL_SIZE * 5 // 6), caption, fill=(0, 0, 0), anchor="mm", font_size=12)
    return cell


def converted_task(name: str, source: str | Path) -> Task:
    """The pointing task `<name>_pointing` of a benchmark file (`name` one of RECIPES), its items read and
    checked once; item i of the task is line i of the file (the rng is not used)."""
    key = name.lower()
    if key not in RECIPES:
        raise BenchmarkError(f"benchmark {name!r} has no conversion recipe; known: {', '.join(RECIPES)}")
    recipe = RECIPES[key]
    items = read_items(source, recipe)

    def cells(rng, index: int) -> Cells:
        if index >= len(items):
            raise BenchmarkError(f"{_jsonl(Path(source))}: item {index} asked for, the file has {len(items)}")
        item = items[index]
        if recipe == "overlay":
            tiles = [_cell(item["image"], option) for option in item["options"]] + [_cell(item["image"], None)]
            question = f"{item['question']} {QUESTION}"
            phrase = item["question"]
        else:
            tiles = [_cell(image, None) for image in item["images"]]
            tiles.append(Image.new("RGB", (PANEL_SIZE, PANEL_SIZE), BLANK_GREY))
            question = f"Which image does this describe: {item['question']}"
            phrase = item["question"]
        texts = item["options"] + ["none of these"]
        return Cells(tiles=tiles, texts=texts, question=question, phrase=phrase, correct=item["correct"])

    shown = SHOWN[recipe]
    digest = hashlib.sha256(_jsonl(Path(source)).read_bytes()).hexdigest()[:16]  # the file's items, for cache keys
    return Task(f"{name}_pointing", "converted", shown, cells, source=digest)
