"""The paper's stimuli on our images: corpora of labelled tiles and the item builders made from them.

A *corpus* hands out square tiles of a named class (`tile(label, rng, size)`); three kinds:
`cm` (flat cartoon-like panels), `co` (photo-like: texture, clutter, varied scale and position) and an
image folder of real pictures. Builders turn a corpus into `Item`s, deterministically by seed:

- strips of six panels (3 columns x 2 rows, read left to right, top to bottom) with an ordinal question
  ("What is in panel 3?" -> "panel 3 red star") or a referring question ("Which panel shows the red
  star?" -> "red star in panel 3");
- 2x2 grids whose cells are options A-D (the CERS apparatus), with an oracle variant naming the
  target cell and a blank-image floor;
- single-image MCQ, matched (the image shows the correct option) and mismatched (it shows a class
  excluded from the options), and a text-solvable arm (the answer is in the text); options are written
  "Options: red star (A), blue ring (B), ...", each letter after its text.

The toy model's own training tasks (describe, locate, name, recall) are built from these items in
`helpers/toy/tasks.py`.

Boxes are pixel boxes `(x0, y0, x1, y1)`, x1/y1 exclusive. Query spans are character offsets into
`Item.prompt`.

`corpus_of` and `items_of` hand out a corpus and its rendered items once per process (each image drawn once, not
once per chunk and run); `corpus_key` is what a cache key records of a corpus.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import math
import os
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, UnidentifiedImageError

from helpers.engine.item import LETTERS, Box, Item
from helpers.storage import timers
from helpers.storage.files import file_hashes

PANEL_SIZE = 64  # px; 2x2 image tokens per panel in Qwen3-VL (32 px tokens), one in the toy (64 px)
STRIP_PANELS = 6
STRIP_COLUMNS = 3
GRID_CELL_NAMES = ("top left", "top right", "bottom left", "bottom right")  # cells of A, B, C, D
BLANK_GREY = (128, 128, 128)

COLOURS = {
    "red": (215, 35, 35),
    "green": (30, 160, 60),
    "blue": (40, 80, 220),
    "yellow": (240, 205, 30),
    "purple": (140, 50, 180),
    "black": (20, 20, 20),
}
SHAPES = ("circle", "square", "triangle", "cross", "star", "ring")


# --------------------------------------------------------------------------------------------- corpora


class SyntheticCorpus:
    """Coloured shapes drawn on the fly; a label is "<colour> <shape>" (36 classes).

    The regions of one item never share a colour or a shape (up to six regions): every object can be
    told apart by either word, as the distinct objects of a real multiple-choice question can."""

    def __init__(self, name: str):
        if name not in ("cm", "co"):
            raise ValueError(f"synthetic corpus name {name!r} is not one of 'cm', 'co'")
        self.name = name
        self.labels = tuple(f"{c} {s}" for c in COLOURS for s in SHAPES)

    def pick_labels(self, rng: np.random.Generator, n: int) -> list[str]:
        """n classes with n distinct colours and n distinct shapes (n <= 6); beyond six, n distinct classes."""
        if n > min(len(COLOURS), len(SHAPES)):
            return [self.labels[i] for i in rng.choice(len(self.labels), size=n, replace=False)]
        colours = rng.choice(list(COLOURS), size=n, replace=False)
        shapes = rng.choice(SHAPES, size=n, replace=False)
        return [f"{colour} {shape}" for colour, shape in zip(colours, shapes)]

    def tile(self, label: str, rng: np.random.Generator, size: int = PANEL_SIZE) -> Image.Image:
        if label not in self.labels:
            raise ValueError(f"label {label!r} is not in corpus {self.name!r}; allowed: {self.labels}")
        colour, shape = label.split(" ")
        if self.name == "cm":
            return _cartoon_tile(COLOURS[colour], shape, rng, size)
        return _photo_tile(COLOURS[colour], shape, rng, size)


class ImageFolderCorpus:
    """Real pictures: class sub-folders of `root`, or a CSV with columns path,label (paths relative to
    the CSV). Tiles are centre-cropped squares resized to the panel size."""

    IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp")

    def __init__(self, source: str | Path, name: str | None = None):
        source = Path(source)
        if source.is_dir():
            paths_by_label = self._scan_folders(source)
        elif source.is_file() and source.suffix.lower() == ".csv":
            paths_by_label = self._read_csv(source)
        else:
            raise ValueError(f"image corpus source {str(source)!r} is neither a folder nor a .csv file")
        if not paths_by_label:
            raise ValueError(
                f"image corpus {str(source)!r} holds no images "
                f"(expected class sub-folders with {self.IMAGE_SUFFIXES} files, or path,label rows)"
            )
        self.name = name or source.stem
        self.root = source if source.is_dir() else source.parent  # file names are relative to it
        self.paths_by_label = paths_by_label
        self.labels = tuple(sorted(paths_by_label))

    def pick_labels(self, rng: np.random.Generator, n: int) -> list[str]:
        """n distinct classes."""
        return [self.labels[i] for i in rng.choice(len(self.labels), size=n, replace=False)]

    def check_readable(self) -> None:
        """Open every file's header: an unreadable image fails now, naming it, not in the middle of a run."""
        for label, paths in self.paths_by_label.items():
            for path in paths:
                try:
                    with Image.open(path):
                        pass
                except (UnidentifiedImageError, OSError) as error:
                    raise ValueError(
                        f"image corpus {self.name!r}: {str(path)!r} (class {label!r}) is not a readable image "
                        f"({error}); remove or replace it"
                    ) from error

    def identity(self) -> str:
        """Content identity for cache keys: the name (it seeds the item draws) and a sha256 over every
        (label, relative file name, size, content sha256); the folder's location does not count."""
        entries = sorted((label, path) for label, paths in self.paths_by_label.items() for path in paths)
        digest = hashlib.sha256()
        for (label, path), content in zip(entries, file_hashes([path for _, path in entries])):
            relative = os.path.relpath(path, self.root)
            digest.update(f"{label}\t{relative}\t{path.stat().st_size}\t{content}\n".encode())
        return f"{self.name}#{digest.hexdigest()[:16]}"

    def _scan_folders(self, root: Path) -> dict[str, list[Path]]:
        paths_by_label, folder_of = {}, {}
        for folder in sorted(p for p in root.iterdir() if p.is_dir()):
            paths = sorted(p for p in folder.iterdir() if p.suffix.lower() in self.IMAGE_SUFFIXES)
            if not paths:
                raise ValueError(f"class folder {str(folder)!r} holds no images with suffix {self.IMAGE_SUFFIXES}")
            label = folder.name.replace("_", " ")
            if label in folder_of:
                raise ValueError(
                    f"class folders {folder_of[label].name!r} and {folder.name!r} in {str(root)!r} both name "
                    f"the class {label!r} ('_' reads as a space): rename one of them"
                )
            folder_of[label] = folder
            paths_by_label[label] = paths
        return paths_by_label

    def _read_csv(self, csv_path: Path) -> dict[str, list[Path]]:
        paths_by_label: dict[str, list[Path]] = {}
        with open(csv_path, newline="") as f:
            for row in csv.DictReader(f):
                if "path" not in row or "label" not in row:
                    raise ValueError(f"{str(csv_path)!r} needs the columns 'path' and 'label'; got {list(row)}")
                path = (csv_path.parent / row["path"]).resolve()
                if not path.is_file():
                    raise ValueError(f"{str(csv_path)!r} lists {row['path']!r}, which is not a file")
                paths_by_label.setdefault(row["label"], []).append(path)
        return paths_by_label

    def tile(self, label: str, rng: np.random.Generator, size: int = PANEL_SIZE) -> Image.Image:
        if label not in self.paths_by_label:
            raise ValueError(f"label {label!r} is not in corpus {self.name!r}; allowed: {self.labels}")
        paths = self.paths_by_label[label]
        path = paths[int(rng.integers(len(paths)))]
        try:
            image = Image.open(path).convert("RGB")
        except (UnidentifiedImageError, OSError) as error:
            raise ValueError(f"cannot read image {str(path)!r} of class {label!r}: {error}") from error
        side = min(image.size)
        left, top = (image.width - side) // 2, (image.height - side) // 2
        return image.crop((left, top, left + side, top + side)).resize((size, size), Image.BILINEAR)


def corpus_identity(corpus: SyntheticCorpus | ImageFolderCorpus) -> str:
    """What a cache key records of a corpus: a synthetic corpus by its name, an image corpus by its content."""
    return corpus.name if isinstance(corpus, SyntheticCorpus) else corpus.identity()


def corpus_key(corpus: str) -> str:
    """What a cache key records of the corpus named `corpus` (its name, or an image corpus's content)."""
    return corpus_identity(corpus_of(corpus))


def load_corpus(name_or_path: str | Path) -> SyntheticCorpus | ImageFolderCorpus:
    """`"cm"` / `"co"` for the synthetic corpora, else a folder or CSV of real images."""
    if str(name_or_path) in ("cm", "co"):
        return SyntheticCorpus(str(name_or_path))
    return ImageFolderCorpus(name_or_path)


# ------------------------------------------------------------------------------------- drawing tiles


def _shape_polygon(shape: str, cx: float, cy: float, r: float) -> list[tuple[float, float]]:
    if shape == "square":
        return [(cx - r, cy - r), (cx + r, cy - r), (cx + r, cy + r), (cx - r, cy + r)]
    if shape == "triangle":
        return [(cx, cy - r), (cx + r, cy + r * 0.8), (cx - r, cy + r * 0.8)]
    if shape == "cross":
        w = r * 0.38
        return [
            (cx - w, cy - r),
            (cx + w, cy - r),
            (cx + w, cy - w),
            (cx + r, cy - w),
            (cx + r, cy + w),
            (cx + w, cy + w),
            (cx + w, cy + r),
            (cx - w, cy + r),
            (cx - w, cy + w),
            (cx - r, cy + w),
            (cx - r, cy - w),
            (cx - w, cy - w),
        ]
    if shape == "star":
        points = []
        for k in range(10):
            radius = r if k % 2 == 0 else r * 0.45
            angle = -math.pi / 2 + k * math.pi / 5
            points.append((cx + radius * math.cos(angle), cy + radius * math.sin(angle)))
        return points
    raise ValueError(f"shape {shape!r} has no polygon")


def draw_shape(draw: ImageDraw.ImageDraw, shape: str, rgb: tuple[int, int, int], cx: float, cy: float, r: float):
    """Draw one shape of ``SHAPES`` in colour ``rgb``, centred at (cx, cy) with radius r in pixels."""
    if shape == "circle":
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=rgb)
    elif shape == "ring":
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), outline=rgb, width=max(3, round(r * 0.35)))
    else:
        draw.polygon(_shape_polygon(shape, cx, cy, r), fill=rgb)


def _cartoon_tile(rgb, shape: str, rng: np.random.Generator, size: int) -> Image.Image:
    """Flat pale background, dark border, one centred object of moderate size."""
    pale = tuple(int(v) for v in rng.integers(215, 250, size=3))
    image = Image.new("RGB", (size, size), pale)
    draw = ImageDraw.Draw(image)
    r = size * rng.uniform(0.26, 0.36)
    cx, cy = size / 2 + rng.uniform(-3, 3), size / 2 + rng.uniform(-3, 3)
    draw_shape(draw, shape, rgb, cx, cy, r)
    draw.rectangle((0, 0, size - 1, size - 1), outline=(40, 40, 40), width=max(1, size // 32))
    return image


def _photo_tile(rgb, shape: str, rng: np.random.Generator, size: int) -> Image.Image:
    """Noisy muted texture with a colour gradient, a few grey clutter blobs, one object at a random
    scale and position, a slight blur and lighting change."""
    base = rng.integers(90, 170, size=3).astype(np.float32)
    ramp = np.linspace(-25, 25, size, dtype=np.float32)[None, :, None] * rng.choice([-1, 1])
    noise = rng.normal(0, 14, size=(size, size, 1)).astype(np.float32)
    pixels = np.clip(base[None, None, :] + ramp + noise, 0, 255).astype(np.uint8)
    image = Image.fromarray(pixels, "RGB")
    draw = ImageDraw.Draw(image)
    for _ in range(int(rng.integers(2, 5))):
        grey = int(rng.integers(60, 200))
        x, y = rng.uniform(0, size, size=2)
        w, h = rng.uniform(3, size * 0.12, size=2)
        draw.ellipse((x - w, y - h, x + w, y + h), fill=(grey, grey, int(grey * 0.9)))
    r = size * rng.uniform(0.27, 0.36)
    cx, cy = rng.uniform(r + 1, size - r - 1, size=2)
    shade = rng.uniform(0.8, 1.1)
    draw_shape(draw, shape, tuple(int(min(255, v * shade)) for v in rgb), cx, cy, r)
    return image.filter(ImageFilter.GaussianBlur(radius=float(rng.uniform(0.0, 0.6))))


# --------------------------------------------------------------------------------------------- helpers

KINDS = ("strip_ord", "strip_ref", "grid", "grid_oracle", "grid_blank", "single_matched", "single_mismatched", "text")


def item_rng(seed: int, stream: str, index: int) -> np.random.Generator:
    """Independent, reproducible stream per (seed, stream name, item index)."""
    stream_code = sum((i + 1) * ord(ch) for i, ch in enumerate(stream))
    return np.random.default_rng([seed, stream_code, index])


def _need_classes(corpus, needed: int, what: str):
    if len(corpus.labels) < needed:
        raise ValueError(
            f"{what} needs at least {needed} classes, corpus {corpus.name!r} has {len(corpus.labels)}: {corpus.labels}"
        )


def paste_tiles(tiles: list[Image.Image], columns: int) -> tuple[Image.Image, list[Box]]:
    """Lay square tiles out row by row; returns the canvas and each tile's box."""
    side = tiles[0].width
    rows = math.ceil(len(tiles) / columns)
    canvas = Image.new("RGB", (columns * side, rows * side), (255, 255, 255))
    boxes = []
    for i, tile in enumerate(tiles):
        x0, y0 = (i % columns) * side, (i // columns) * side
        canvas.paste(tile, (x0, y0))
        boxes.append((x0, y0, x0 + side, y0 + side))
    return canvas, boxes


def text_span(text: str, phrase: str) -> tuple[int, int]:
    start = text.index(phrase)
    return start, start + len(phrase)


def options_block(options: list[str]) -> str:
    """The options in one sentence, each letter after its text: "Options: purple cross (A), ... (D)."."""
    return "Options: " + ", ".join(f"{option} ({letter})" for letter, option in zip(LETTERS, options)) + "."


# ----------------------------------------------------------------------------------------------- strips

STRIP_QUERIES = ("ord", "ref")


def strip_question(query: str, labels: list[str], target: int) -> tuple[str, tuple[int, int], str]:
    """(prompt, query span, answer) of a strip question about panel index `target` (0-based)."""
    reading = "The panels are read left to right, top to bottom."
    if query == "ord":
        prompt = f"{reading} What is in panel {target + 1}?"
        return prompt, text_span(prompt, f"panel {target + 1}"), f"panel {target + 1} {labels[target]}"
    if query != "ref":
        raise ValueError(f"strip query {query!r} is not one of {STRIP_QUERIES}")
    prompt = f"{reading} Which panel shows the {labels[target]}?"
    return prompt, text_span(prompt, f"the {labels[target]}"), f"{labels[target]} in panel {target + 1}"


def strip_items(
    corpus,
    n: int,
    seed: int,
    query: str,
    n_panels: int = STRIP_PANELS,
    columns: int = STRIP_COLUMNS,
    panel_size: int = PANEL_SIZE,
) -> list[Item]:
    """Strips of `n_panels` distinct classes. `query`: "ord" (What is in panel p? -> "panel p <label>") or
    "ref" (Which panel shows the <label>? -> "<label> in panel p")."""
    if query not in STRIP_QUERIES:
        raise ValueError(f"strip query {query!r} is not one of {STRIP_QUERIES}")
    if columns < 1 or n_panels < 2 or n_panels > 9 or n_panels % columns != 0:
        raise ValueError(f"n_panels={n_panels} does not fit: it must be 2..9 and fill whole rows of columns={columns}")
    _need_classes(corpus, n_panels, f"a strip of {n_panels} distinct panels")
    items = []
    for index in range(n):
        rng = item_rng(seed, f"strip-{corpus.name}-{n_panels}x{columns}", index)
        labels = corpus.pick_labels(rng, n_panels)
        image, panel_boxes = paste_tiles([corpus.tile(label, rng, panel_size) for label in labels], columns)
        boxes = {f"panel {i + 1}": box for i, box in enumerate(panel_boxes)}
        target = int(rng.integers(n_panels))
        prompt, span, answer = strip_question(query, labels, target)
        items.append(
            Item(
                kind=f"strip_{query}",
                corpus=corpus.name,
                image=image,
                prompt=prompt,
                answer=answer,
                query_span=span,
                boxes=boxes,
                target=f"panel {target + 1}",
                labels=tuple(labels),
                seed_key=(seed, index),
            )
        )
    return items


# ------------------------------------------------------------------------------------------------ grids

GRID_LAYOUT = "The image is a 2x2 grid: top left (A), top right (B), bottom left (C), bottom right (D)."


def grid_question(variant: str, labels: list[str], correct: int) -> tuple[str, tuple[int, int]]:
    """(prompt, query span) of the grid question about cell index `correct`."""
    question = f"{GRID_LAYOUT} Which cell shows the {labels[correct]}?"
    hint = f" Hint: it is the {GRID_CELL_NAMES[correct]} cell." if variant == "oracle" else ""
    prompt = f"{question}{hint} Answer with the letter."
    return prompt, text_span(prompt, f"the {labels[correct]}")


GRID_VARIANTS = ("plain", "oracle", "blank")


def grid_items(corpus, n: int, seed: int, variant: str = "plain", cell_size: int = PANEL_SIZE) -> list[Item]:
    """2x2 grids of four distinct classes; cell A top left, B top right, C bottom left, D bottom right.
    The question names one class; the answer is its cell's letter. `variant`: "plain", "oracle" (the
    prompt also names the target cell, expect ~1), or "blank" (same prompt, a blank grey image: ~0.25).
    Item i has the same classes and target in every variant."""
    if variant not in GRID_VARIANTS:
        raise ValueError(f"grid variant {variant!r} is not one of {GRID_VARIANTS}")
    _need_classes(corpus, 4, "a 2x2 grid of four options")
    kind = "grid" if variant == "plain" else f"grid_{variant}"
    items = []
    for index in range(n):
        rng = item_rng(seed, f"grid-{corpus.name}", index)
        labels = corpus.pick_labels(rng, 4)
        correct = int(rng.integers(4))
        image, cell_boxes = paste_tiles([corpus.tile(label, rng, cell_size) for label in labels], 2)
        if variant == "blank":
            image = Image.new("RGB", image.size, BLANK_GREY)
        prompt, span = grid_question(variant, labels, correct)
        items.append(
            Item(
                kind=kind,
                corpus=corpus.name,
                image=image,
                prompt=prompt,
                answer=LETTERS[correct],
                query_span=span,
                boxes=dict(zip(LETTERS, cell_boxes)),
                target=LETTERS[correct],
                labels=tuple(labels),
                options=tuple(labels),
                correct=correct,
                seed_key=(seed, index),
            )
        )
    return items


# ----------------------------------------------------------------------------------- single-image MCQ

SINGLE_ARMS = ("matched", "mismatched", "text")


def single_image_items(corpus, n: int, seed: int, arm: str = "matched", image_size: int = PANEL_SIZE) -> list[Item]:
    """Four class names as options A-D. `arm`: "matched" (the image shows the correct option),
    "mismatched" (it shows a fifth class, not among the options; the correct letter is kept, so
    P(correct) should sit at chance) or "text" (the prompt states the answer; the image shows an
    unrelated fifth class). Item i has the same options and correct letter in every arm."""
    if arm not in SINGLE_ARMS:
        raise ValueError(f"single-image arm {arm!r} is not one of {SINGLE_ARMS}")
    _need_classes(corpus, 5, "single-image MCQ (four options and one excluded class)")
    kind = {"matched": "single_matched", "mismatched": "single_mismatched", "text": "text"}[arm]
    items = []
    for index in range(n):
        rng = item_rng(seed, f"single-{corpus.name}", index)
        labels = corpus.pick_labels(rng, 5)  # four options, then the excluded class
        options, excluded = labels[:4], labels[4]
        correct = int(rng.integers(4))
        shown = options[correct] if arm == "matched" else excluded
        image = corpus.tile(shown, rng, image_size)
        if arm == "text":
            lead = f"The note says the box holds the {options[correct]}."
            prompt = f"{lead} What does the box hold? {options_block(options)} Answer with the letter."
            span = text_span(prompt, f"the {options[correct]}")
        else:
            prompt = f"What does the image show? {options_block(options)} Answer with the letter."
            span = text_span(prompt, "the image")
        items.append(
            Item(
                kind=kind,
                corpus=corpus.name,
                image=image,
                prompt=prompt,
                answer=LETTERS[correct],
                query_span=span,
                boxes={"image": (0, 0, image.width, image.height)},
                target="image",
                labels=(shown,),
                options=tuple(options),
                correct=correct,
                seed_key=(seed, index),
            )
        )
    return items


@timers.timed("items")
def build_items(kind: str, corpus, n: int, seed: int) -> list[Item]:
    """Any of KINDS by name, with default sizes."""
    builders = {
        "strip_ord": lambda: strip_items(corpus, n, seed, "ord"),
        "strip_ref": lambda: strip_items(corpus, n, seed, "ref"),
        "grid": lambda: grid_items(corpus, n, seed, "plain"),
        "grid_oracle": lambda: grid_items(corpus, n, seed, "oracle"),
        "grid_blank": lambda: grid_items(corpus, n, seed, "blank"),
        "single_matched": lambda: single_image_items(corpus, n, seed, "matched"),
        "single_mismatched": lambda: single_image_items(corpus, n, seed, "mismatched"),
        "text": lambda: single_image_items(corpus, n, seed, "text"),
    }
    if kind not in builders:
        raise ValueError(f"item kind {kind!r} is not one of {KINDS}")
    return builders[kind]()


@functools.lru_cache(maxsize=8)
def corpus_of(corpus: str):
    """load_corpus(corpus), once per process (an image folder is scanned and checked once)."""
    return load_corpus(corpus)


@functools.lru_cache(maxsize=32)
def items_of(kind: str, corpus: str, n: int, seed: int) -> tuple[Item, ...]:
    """build_items(kind, corpus, n, seed), rendered once per process (item i does not depend on n)."""
    return tuple(build_items(kind, corpus_of(corpus), n, seed))
