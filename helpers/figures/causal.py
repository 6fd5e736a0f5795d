"""Figures of notebooks 03 (CERS) and 04 (NCS): discovered head-sets against their random controls."""

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd


def plot_against_random(
    table: pd.DataFrame, score: str, any_layer: pd.DataFrame | None = None, p_column: str = "p"
) -> plt.Figure:
    """Figure 3 (one panel): each setting's discovered set S (dot, with its 95% interval) against the
    mean +- SD of its layer-matched random sets (bar) and, when given, the any-layer random sets. A red
    dot marks `p_column` <= .05; the legend says whether that p is Holm-adjusted across the settings.

    table: one row per setting with columns setting, S, S low, S high, random mean, random sd, p_column."""
    fig, ax = plt.subplots(figsize=(8.5, 3.6))
    x = np.arange(len(table))
    ax.bar(
        x,
        2 * table["random sd"],
        bottom=table["random mean"] - table["random sd"],
        width=0.6,
        color="#bdbdbd",
        label="layer-matched random: mean ± SD",
    )
    ax.hlines(table["random mean"], x - 0.3, x + 0.3, color="#636363", lw=1)
    if any_layer is not None:
        ax.errorbar(
            x + 0.38,
            any_layer["random mean"],
            yerr=any_layer["random sd"],
            fmt="s",
            ms=3,
            color="#9e9ac8",
            lw=1,
            label="any-layer random: mean ± SD",
        )
    colours = ["#d62728" if p <= 0.05 else "#1f77b4" for p in table[p_column]]
    adjusted = "Holm-adjusted rank p" if "holm" in p_column.lower() else "rank p, not adjusted across settings,"
    ax.errorbar(
        x,
        table["S"],
        yerr=[table["S"] - table["S low"], table["S high"] - table["S"]],
        fmt="none",
        ecolor="#444444",
        lw=1,
    )
    ax.scatter(x, table["S"], c=colours, zorder=3, s=28, label=f"discovered S (95% CI); red: {adjusted} ≤ .05")
    ax.axhline(0, color="black", lw=0.6)
    ax.set_xticks(x, table["setting"], rotation=45, ha="right", fontsize=8)
    ax.set_ylabel(score)
    ax.set_title(f"{score}: discovered head-sets against layer-matched random head-sets")
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig


def plot_beta_sweep(sweep: pd.DataFrame) -> plt.Figure:
    """Table 18 as a figure: CERS of S and of its random sets (mean, min-max band) against beta, one
    panel per setting. sweep: columns setting, beta, S, random mean, random min, random max."""
    settings = list(dict.fromkeys(sweep["setting"]))
    fig, axes = plt.subplots(1, len(settings), figsize=(3.1 * len(settings), 3), sharey=True, squeeze=False)
    for ax, setting in zip(axes[0], settings):
        rows = sweep[sweep["setting"] == setting]
        ax.fill_between(
            rows["beta"], rows["random min"], rows["random max"], color="#bdbdbd", alpha=0.6, label="random: min-max"
        )
        ax.plot(rows["beta"], rows["random mean"], color="#636363", marker=".", label="random: mean")
        ax.plot(rows["beta"], rows["S"], color="#d62728", marker="o", label="discovered S")
        ax.axhline(0, color="black", lw=0.6)
        ax.set_xscale("log")
        ax.set(title=setting, xlabel="β")
    axes[0, 0].set_ylabel("CERS")
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    return fig
