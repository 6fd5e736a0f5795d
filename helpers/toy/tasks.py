"""The toy model's own training tasks, built from the paper's stimuli (``helpers.stimuli.corpora``).

Each task keeps the image, classes and target of the paper item with the same seed and index and
changes only what is asked and answered:

- ``strip_describe``: every panel in reading order ("1 red star 2 blue ring ...");
- ``strip_locate`` / ``grid_locate``: every object in alphabetical order with its place
  ("black cross in panel 4, ...", "black cross (C), ...");
- ``grid_describe``: every cell with its letter ("A red star B blue ring ...");
- ``single_name``: name the matched single image's class;
- ``option_recall``: recite the four options with their letters in a shuffled order;
- ``pointing_<variant>``: the pointing suite's synthetic tasks (counting, spatial relation, arithmetic,
  scene retrieval, attribute; ``helpers.stimuli.pointing``), one stimulus variant per kind, the tasks in
  turn by item index.

Describe binds places to objects, locate binds objects to places; ``retarget`` asks the same image
about another region (the follow-up turns of a training conversation).
"""

from __future__ import annotations

from dataclasses import replace

from helpers.stimuli import corpora as stimuli
from helpers.stimuli import pointing
from helpers.stimuli.corpora import LETTERS, Item, item_rng, options_block, text_span

POINTING_KINDS = tuple(f"pointing_{variant}" for variant in pointing.VARIANTS)
TOY_KINDS = (
    "strip_describe",
    "strip_locate",
    "grid_describe",
    "grid_locate",
    "single_name",
    "option_recall",
    *POINTING_KINDS,
)
ALL_KINDS = stimuli.KINDS + TOY_KINDS
RETARGETABLE = ("strip_ord", "strip_ref", "grid", "grid_oracle")
LOCATE_REQUEST = "Locate every object in alphabetical order."
READING = "The panels are read left to right, top to bottom."


def alphabetical_order(labels: list[str]) -> list[int]:
    """Region indices sorted by their label: the fixed order in which the locate tasks list the objects
    (for the synthetic corpora, the order of the colours' names, since a strip or grid never repeats one)."""
    return sorted(range(len(labels)), key=lambda i: labels[i])


def _strip_task(item: Item, kind: str) -> Item:
    labels = list(item.labels)
    if kind == "strip_locate":
        prompt = f"{READING} {LOCATE_REQUEST}"
        span, answer = (
            text_span(prompt, "every object"),
            ", ".join(f"{labels[i]} in panel {i + 1}" for i in alphabetical_order(labels)),
        )
    else:
        prompt = f"{READING} Describe every panel in order."
        span, answer = text_span(prompt, "every panel"), " ".join(f"{i + 1} {label}" for i, label in enumerate(labels))
    return replace(item, kind=kind, prompt=prompt, query_span=span, answer=answer)


def _grid_task(item: Item, kind: str) -> Item:
    labels = list(item.labels)
    if kind == "grid_locate":
        prompt = f"{stimuli.GRID_LAYOUT} {LOCATE_REQUEST}"
        span, answer = (
            text_span(prompt, "every object"),
            ", ".join(f"{labels[i]} ({LETTERS[i]})" for i in alphabetical_order(labels)),
        )
    else:
        prompt = f"{stimuli.GRID_LAYOUT} Name every cell with its letter."
        span, answer = text_span(prompt, "every cell"), " ".join(f"{l} {label}" for l, label in zip(LETTERS, labels))
    return replace(item, kind=kind, prompt=prompt, query_span=span, answer=answer)


def _name_task(item: Item) -> Item:
    prompt = "What is in the image?"
    return replace(
        item,
        kind="single_name",
        prompt=prompt,
        answer=item.labels[0],
        query_span=text_span(prompt, "the image"),
        options=(),
        correct=None,
    )


def _recall_task(item: Item, corpus_name: str) -> Item:
    order = item_rng(item.seed_key[0], f"recall-{corpus_name}", item.seed_key[1]).permutation(4)
    prompt = f"{options_block(list(item.options))} List them with their letters."
    return replace(
        item,
        kind="option_recall",
        prompt=prompt,
        query_span=text_span(prompt, "List them"),
        answer=", ".join(f"{item.options[i]} ({LETTERS[i]})" for i in order),
    )


def _pointing_items(variant: str, n: int, seed: int) -> list[Item]:
    """n items of the pointing suite's `variant`, the SYNTHETIC tasks in turn (item i is task i mod 5, the
    suite's own item i of that task at `seed`)."""
    tasks = list(pointing.SYNTHETIC.values())
    return [pointing.task_items(tasks[i % len(tasks)], i + 1, seed, variant, start=i)[0] for i in range(n)]


def build_task_items(kind: str, corpus, n: int, seed: int) -> list[Item]:
    """Any of ALL_KINDS (the paper's stimuli and the toy's tasks) by name. The pointing kinds draw their
    own cells and ignore `corpus`."""
    if kind in stimuli.KINDS:
        return stimuli.build_items(kind, corpus, n, seed)
    if kind in ("strip_describe", "strip_locate"):
        return [_strip_task(item, kind) for item in stimuli.strip_items(corpus, n, seed, "ord")]
    if kind in ("grid_describe", "grid_locate"):
        return [_grid_task(item, kind) for item in stimuli.grid_items(corpus, n, seed)]
    if kind == "single_name":
        return [_name_task(item) for item in stimuli.single_image_items(corpus, n, seed, "matched")]
    if kind == "option_recall":
        return [_recall_task(item, corpus.name) for item in stimuli.single_image_items(corpus, n, seed, "matched")]
    if kind in POINTING_KINDS:
        return _pointing_items(kind.removeprefix("pointing_"), n, seed)
    raise ValueError(f"item kind {kind!r} is not one of {ALL_KINDS}")


def retarget(item: Item, target: int) -> Item:
    """The same image asked about region index `target` instead (strip ord/ref questions, plain and
    oracle grids)."""
    if item.kind not in RETARGETABLE:
        raise ValueError(f"item kind {item.kind!r} cannot be retargeted; allowed: {RETARGETABLE}")
    if not 0 <= target < len(item.labels):
        raise ValueError(f"target {target} is outside the item's {len(item.labels)} regions")
    labels = list(item.labels)
    if item.kind.startswith("strip"):
        prompt, span, answer = stimuli.strip_question(item.kind.removeprefix("strip_"), labels, target)
        return replace(item, prompt=prompt, query_span=span, answer=answer, target=f"panel {target + 1}")
    prompt, span = stimuli.grid_question("oracle" if item.kind == "grid_oracle" else "plain", labels, target)
    return replace(
        item, prompt=prompt, query_span=span, answer=LETTERS[target], target=LETTERS[target], correct=target
    )
