"""Figures of notebook 08 (the field's published methods): every method's score map, and the top-k overlap of the
methods with each other and with the paper's 12 discovery settings."""

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns


def plot_method_score_maps(scores: dict[str, np.ndarray]) -> plt.Figure:
    """One panel per method: its score of every head, layers down and heads across. scores: {method: [L, H]}."""
    fig, axes = plt.subplots(1, len(scores), figsize=(2.2 * len(scores), 3.2), sharey=True)
    for ax, (name, score) in zip(axes, scores.items()):
        ax.imshow(score, aspect="auto", cmap="viridis")
        ax.set_title(name, fontsize=8)
        ax.set_xlabel("head")
    axes[0].set_ylabel("layer")
    return fig


def plot_method_overlap(matrix: pd.DataFrame, k: int) -> plt.Figure:
    """The overlap matrix as a heatmap coloured by the share of k: methods (rows) against methods and the settings
    (columns), shared heads printed in each cell; its last row, each column's half-split ceiling (one decimal),
    below a white line. matrix: helpers.studies.methods.comparison.overlap_table."""
    fig, ax = plt.subplots(figsize=(0.45 * matrix.shape[1] + 2, 0.45 * len(matrix) + 1.5))
    annot = matrix.map(lambda v: f"{v:.0f}")
    annot.iloc[-1] = matrix.iloc[-1].map(lambda v: f"{v:.1f}")
    sns.heatmap(matrix / k, annot=annot, fmt="", cmap="viridis", vmin=0, vmax=1, ax=ax, annot_kws={"fontsize": 7})
    ax.axhline(len(matrix) - 1, color="white", linewidth=2)  # the ceilings' row below the methods' rows
    ax.set_title(
        f"Top-{k} overlap: methods (rows) vs methods and the 12 settings, and each column's half-split ceiling "
        "(colour: share of k)"
    )
    return fig
