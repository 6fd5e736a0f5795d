"""Figures of notebook 01: per-setting score maps and the Figure 1-style view of one strip."""

import textwrap

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from helpers.measures.overlap import top_k
from helpers.stimuli.corpora import Item
from helpers.stimuli.design import SETTINGS


def plot_score_maps(mean_scores: dict[str, np.ndarray], k: int) -> plt.Figure:
    """One layers x heads heat map per setting (rows: corpus x query, columns: source), all on one colour
    scale so that settings compare; the flat top-k heads are outlined."""
    names = [s for s in SETTINGS if s in mean_scores]
    cols = 3
    rows = int(np.ceil(len(names) / cols))
    n_layers, n_heads = next(iter(mean_scores.values())).shape
    vmax = max(float(np.nanmax(mean_scores[name])) for name in names)
    fig, axes = plt.subplots(rows, cols, figsize=(3.3 * cols, 0.2 * n_layers * rows + 1.2 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        scores = mean_scores[name]
        image = ax.imshow(scores, aspect="auto", cmap="magma", origin="lower", vmin=0, vmax=vmax)
        for layer, head in zip(*np.nonzero(top_k(scores, k))):
            ax.add_patch(Rectangle((head - 0.5, layer - 0.5), 1, 1, fill=False, ec="cyan", lw=1.2))
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("head", fontsize=7)
        ax.set_ylabel("layer", fontsize=7)
        ax.tick_params(labelsize=6)
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    fig.tight_layout(rect=(0, 0, 0.92, 0.96))
    colour_axis = fig.add_axes((0.935, 0.15, 0.015, 0.7))
    fig.colorbar(image, cax=colour_axis, label="score (shared scale)").ax.tick_params(labelsize=6)
    fig.suptitle(
        f"Discovery score per head (mean attention mass to the asked-about panel); cyan: top-{k}", fontsize=10
    )
    return fig


def plot_strip_overview(item: Item, profile: dict[str, np.ndarray], setting_prefix: str, k: int) -> plt.Figure:
    """The strip with its asked-about panel boxed, and for each source the attention that its top-k heads
    send to every panel (Figure 1, panel 1)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.2), gridspec_kw={"width_ratios": [1.2, 1]})
    left.imshow(item.image)
    x0, y0, x1, y1 = item.boxes[item.target]
    left.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, ec="lime", lw=3))
    for name, (bx0, by0, _, _) in item.boxes.items():
        left.text(bx0 + 3, by0 + 10, name.split()[-1], color="white", fontsize=8, weight="bold")
    left.set_title(f"{textwrap.fill(item.prompt, 70)}\nanswer: {item.answer}", fontsize=8)
    left.axis("off")
    panels = [name for name in item.boxes if name.startswith("panel")]
    width = 0.8 / len(profile)
    for i, (source, mass) in enumerate(profile.items()):
        right.bar(np.arange(len(panels)) + i * width, mass, width, label=f"{setting_prefix}-{source}")
    right.set_xticks(np.arange(len(panels)) + 0.4 - width / 2, [p.split()[-1] for p in panels])
    target = panels.index(item.target)
    right.axvspan(target - width / 2, target + (len(profile) - 0.5) * width, color="lime", alpha=0.15)
    right.set(xlabel="panel (asked-about panel shaded)", ylabel=f"attention mass, mean of top-{k} heads")
    right.legend(fontsize=8)
    fig.tight_layout()
    return fig
