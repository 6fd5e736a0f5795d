"""Plots of notebook 06 (cross-model): Figure 7 per model."""

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd


def plot_overlaps_per_model(overlaps: pd.DataFrame, paper_ranges: pd.DataFrame) -> plt.Figure:
    """Figure 7: per model (groups), the native sets' overlaps and the random draw's, per 100 heads of the set;
    the paper's range over its models for each pair as a grey band behind the bars."""
    models, pairs = list(dict.fromkeys(overlaps.model)), list(dict.fromkeys(overlaps.pair))
    width = 0.8 / len(models)
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    x = np.arange(len(pairs))
    ranges = paper_ranges.set_index("pair")
    for i, pair in enumerate(pairs):
        if pair in ranges.index:
            low, high = ranges.loc[pair, ["paper_low_per_100", "paper_high_per_100"]]
            ax.fill_between([i - 0.45, i + 0.45], low, high, color="0.88", zorder=0)
    for j, model in enumerate(models):
        values = overlaps[overlaps.model == model].set_index("pair")["per 100"].reindex(pairs)
        ax.bar(x - 0.4 + (j + 0.5) * width, values, width, label=model)
    ax.set_xticks(x, pairs, rotation=20, fontsize=8)
    ax.set(ylabel="shared heads per 100 of the set", ylim=(0, 100))
    ax.legend(fontsize=7, title="grey: the paper's range over its models", title_fontsize=7)
    return fig
