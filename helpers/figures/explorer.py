"""The head-set explorer's panels (helpers/studies/explorer.py wires widgets to them; batch runs and tests call
them directly). Each takes computed arrays and returns a matplotlib figure; none computes.

- plot_score_map: a layers x heads score map with a head-set outlined;
- plot_overlap_map: two settings' top-k sets on one map (shared, first only, second only);
- plot_attention_overlay: one item's image under one head's attention over the image tokens, with the
  prompt's query span marked;
- plot_random_histograms: a head-set's scores (NCS, CERS, ...) against the histogram of its random sets.
"""

import textwrap

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.patches import Rectangle

from helpers.stimuli.corpora import Item

SET_EDGE = "cyan"
OVERLAP_COLOURS = ["#f0f0f0", "#1f77b4", "#ff7f0e", "#2ca02c"]  # neither, first only, second only, both


def plot_score_map(scores: np.ndarray, head_set: np.ndarray, title: str) -> plt.Figure:
    """scores [L, H] as a heat map (layer 0 at the bottom) with the heads of head_set [L, H] outlined."""
    n_layers, n_heads = scores.shape
    fig, ax = plt.subplots(figsize=(0.28 * n_heads + 2.2, 0.3 * n_layers + 1.4))
    image = ax.imshow(scores, aspect="auto", cmap="magma", origin="lower")
    for layer, head in zip(*np.nonzero(head_set)):
        ax.add_patch(Rectangle((head - 0.5, layer - 0.5), 1, 1, fill=False, ec=SET_EDGE, lw=1.5))
    ax.set(xlabel="head", ylabel="layer", title=f"{title} ({int(np.sum(head_set))} heads outlined)")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.02, label="discovery score")
    fig.tight_layout()
    return fig


def overlap_codes(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[L, H] ints: 0 neither, 1 in a only, 2 in b only, 3 in both."""
    return np.asarray(a, dtype=int) + 2 * np.asarray(b, dtype=int)


def plot_overlap_map(a: np.ndarray, b: np.ndarray, name_a: str, name_b: str) -> plt.Figure:
    """Two head-sets [L, H] on one layers x heads map, titled with their overlap |A n B| of |A|."""
    codes = overlap_codes(a, b)
    n_layers, n_heads = codes.shape
    fig, ax = plt.subplots(figsize=(0.28 * n_heads + 2.2, 0.3 * n_layers + 1.4))
    ax.imshow(codes, aspect="auto", cmap=ListedColormap(OVERLAP_COLOURS), vmin=0, vmax=3, origin="lower")
    labels = ["neither", f"{name_a} only", f"{name_b} only", "both"]
    for colour, label in zip(OVERLAP_COLOURS[1:], labels[1:]):
        ax.plot([], [], "s", color=colour, label=label)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    shared = int(np.sum(codes == 3))
    ax.set(xlabel="head", ylabel="layer", title=f"{name_a} vs {name_b}: {shared} of {int(np.sum(a))} heads shared")
    fig.tight_layout()
    return fig


def plot_attention_overlay(
    item: Item, attention: np.ndarray, tokens: list[str], query: np.ndarray, head: tuple[int, int]
) -> plt.Figure:
    """Left: the item's image with one head's attention (attention [rows, cols], the mass its query-span
    rows send to each image token) laid over it. Right: the prompt's tokens, the query span in bold red.

    tokens: the prompt's text tokens; query: bool [len(tokens)] marking the query span."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4), gridspec_kw={"width_ratios": [1, 1.3]})
    width, height = item.image.size
    left.imshow(item.image)
    overlay = left.imshow(
        attention, cmap="viridis", alpha=0.55, extent=(0, width, height, 0), interpolation="nearest", vmin=0
    )
    target = item.boxes[item.target]
    left.add_patch(
        Rectangle(target[:2], target[2] - target[0], target[3] - target[1], fill=False, ec="red", lw=2, ls="--")
    )
    fig.colorbar(overlay, ax=left, fraction=0.046, pad=0.02, label="attention mass")
    left.set_title(f"L{head[0]}H{head[1]}: query span -> image tokens (target dashed)", fontsize=9)
    left.axis("off")
    right.axis("off")
    x, y = 0.0, 0.95
    for token, in_query in zip(tokens, query):
        text = token.replace("\n", " ")
        if x + 0.018 * len(text) > 1.0:
            x, y = 0.0, y - 0.09
        right.text(
            x, y, text, fontsize=9, color="red" if in_query else "black", weight="bold" if in_query else "normal"
        )
        x += 0.018 * (len(text) + 1)
    right.set_title(textwrap.shorten(f"prompt (query span in red): {item.query_text!r}", 70), fontsize=9)
    fig.tight_layout()
    return fig


def plot_random_histograms(observed: dict[str, float], random: dict[str, np.ndarray], title: str) -> plt.Figure:
    """One panel per score: the histogram of the random sets' values [R] and the set's own value
    (red line), titled with its rank p among them."""
    names = list(observed)
    fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 2.8), squeeze=False)
    for ax, name in zip(axes[0], names):
        values = np.asarray(random[name], dtype=float)
        p = (1 + np.sum(values >= observed[name])) / (values.size + 1)
        ax.hist(
            values, bins=max(5, values.size // 4), color="#9e9e9e", edgecolor="white", label=f"{values.size} random"
        )
        ax.axvline(observed[name], color="#d62728", lw=2, label=f"S = {observed[name]:.3f}")
        ax.set(title=f"{name}: rank p {p:.3f}", xlabel=name, ylabel="random sets")
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
