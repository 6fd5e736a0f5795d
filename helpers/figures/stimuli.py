"""The example-stimuli figure for 00_design: every apparatus of the paper on our images."""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle

from helpers.stimuli.corpora import Item, SyntheticCorpus, grid_items, single_image_items, strip_items


def _show(ax, item: Item, title: str, boxed: str | None, caption: str):
    ax.imshow(item.image, interpolation="nearest")
    if boxed is not None:
        x0, y0, x1, y1 = item.boxes[boxed]
        ax.add_patch(Rectangle((x0 - 0.5, y0 - 0.5), x1 - x0, y1 - y0, fill=False, edgecolor="#e6007e", linewidth=2.5))
    ax.set_title(title, fontsize=9, loc="left")
    ax.set_xlabel("\n".join(textwrap.wrap(caption, 46)), fontsize=7, loc="left")
    ax.set_xticks([])
    ax.set_yticks([])


def plot_example_stimuli(seed: int = 0) -> plt.Figure:
    """cm and co strips (asked-about panel boxed), a 2x2 grid with its options, matched / mismatched
    single images and the text-solvable arm."""
    cm, co = SyntheticCorpus("cm"), SyntheticCorpus("co")
    cm_ord = strip_items(cm, 1, seed, "ord")[0]
    co_ref = strip_items(co, 1, seed, "ref")[0]
    grid = grid_items(cm, 1, seed, "plain")[0]
    matched = single_image_items(co, 1, seed, "matched")[0]
    mismatched = single_image_items(co, 1, seed, "mismatched")[0]
    text_arm = single_image_items(cm, 1, seed, "text")[0]

    def question(item: Item) -> str:  # strips: drop the reading-order sentence; MCQ: options included
        return item.prompt.split(". ", 1)[-1] if item.kind.startswith("strip") else item.prompt

    fig, axes = plt.subplots(2, 3, figsize=(11, 7.2), gridspec_kw={"width_ratios": [1.5, 1.5, 1]})
    _show(
        axes[0, 0],
        cm_ord,
        "cm strip, ordinal query",
        cm_ord.target,
        f"Q: {question(cm_ord)}  A: {cm_ord.answer}  (query span: '{cm_ord.query_text}')",
    )
    _show(
        axes[0, 1],
        co_ref,
        "co strip, referring query",
        co_ref.target,
        f"Q: {question(co_ref)}  A: {co_ref.answer}  (query span: '{co_ref.query_text}')",
    )
    _show(
        axes[0, 2],
        grid,
        "2x2 grid MCQ (CERS)",
        grid.target,
        f"Q: Which cell shows the {grid.options[grid.correct]}?  A: {grid.answer}. "
        "Oracle variant names the cell; floor: blank image.",
    )
    _show(
        axes[1, 0],
        matched,
        "single image, matched (NCS)",
        None,
        f"{question(matched)}  correct: {matched.answer} (image: {matched.labels[0]})",
    )
    _show(
        axes[1, 1],
        mismatched,
        "single image, mismatched (NCS)",
        None,
        f"same options; image shows {mismatched.labels[0]}, not an option: P(correct) ~ 0.25",
    )
    _show(axes[1, 2], text_arm, "text-solvable arm", None, f"{question(text_arm)}  correct: {text_arm.answer}")
    fig.tight_layout()
    return fig
