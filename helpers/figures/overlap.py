"""Figures of notebook 02: how much the 12 settings' head-sets agree."""

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns


def plot_overlap_matrix(matrix: pd.DataFrame, k: int) -> plt.Figure:
    """Figure 2: top-k overlap between every pair of settings as a share of k (the paper's top-100 counts
    read the same way), each cell annotated with its count."""
    fig, ax = plt.subplots(figsize=(7.5, 6.3))
    sns.heatmap(
        matrix / k,
        annot=matrix,
        fmt="d",
        cmap="viridis",
        vmin=0,
        vmax=1,
        square=True,
        cbar_kws={"label": f"shared heads / k (k = {k}; the paper: / 100)"},
        annot_kws={"fontsize": 7},
        ax=ax,
    )
    ax.set_title(f"Top-{k} head overlap between the 12 discovery settings (colour: share of k)")
    return fig


def plot_top_k_curve(curve: pd.DataFrame, a: str, b: str) -> plt.Figure:
    """Figure 6: shared vs. unique heads of two settings as k grows, and the shared fraction."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4))
    left.stackplot(
        curve.k, curve.shared, curve.a_only, labels=["shared", f"{a} only (= {b} only)"], colors=["#3182bd", "#fdae6b"]
    )
    left.set(xlabel="k", ylabel="heads", title="shared and unique heads")
    left.legend(loc="upper left", fontsize=8)
    right.plot(curve.k, curve.fraction, marker="o")
    right.set(xlabel="k", ylabel="shared / k", ylim=(0, 1.02), title=f"{a} vs {b}")
    fig.tight_layout()
    return fig


def plot_chance_overlap(native: pd.DataFrame, chance: dict[str, np.ndarray], k: int, n_heads: int) -> plt.Figure:
    """Figure 7: overlap between native head-sets, and of each with uniform random draws of k heads."""
    fig, ax = plt.subplots(figsize=(7, 3.4))
    ax.bar(native.pair, native.overlap, color="#3182bd", label="between native sets")
    names = list(chance)
    means = [chance[n].mean() for n in names]
    lows = [means[i] - np.percentile(chance[n], 2.5) for i, n in enumerate(names)]
    highs = [np.percentile(chance[n], 97.5) - means[i] for i, n in enumerate(names)]
    ax.bar(
        [f"{n} vs random" for n in names],
        means,
        yerr=[lows, highs],
        color="#bdbdbd",
        capsize=3,
        label="with a random draw (mean, 95% range)",
    )
    ax.axhline(k * k / n_heads, color="k", ls="--", lw=1, label=f"chance k²/N = {k * k / n_heads:.1f}")
    ax.set(ylabel=f"shared heads of top-{k}", ylim=(0, k))
    ax.tick_params(axis="x", rotation=30, labelsize=8)
    ax.legend(fontsize=8)
    return fig
