"""Figures and tables of notebook 00: the 2 x 3 x 2 design."""

import matplotlib.pyplot as plt
import pandas as pd

from helpers.stimuli.design import CORPORA, QUERIES, SETTINGS, SOURCES, parse_setting


def design_table() -> pd.DataFrame:
    """One row per setting: its name and what each of its three factors is."""
    rows = []
    for name in SETTINGS:
        s = parse_setting(name)
        rows.append(
            {
                "setting": name,
                "corpus": CORPORA[s.corpus],
                "query": QUERIES[s.query],
                "attention source": SOURCES[s.source],
            }
        )
    return pd.DataFrame(rows)


def plot_design_grid() -> plt.Figure:
    """The 12 settings as a grid: rows = corpus x query, columns = attention source."""
    rows = [(c, q) for c in CORPORA for q in QUERIES]
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    ax.set_xlim(0, len(SOURCES))
    ax.set_ylim(0, len(rows))
    colours = {"last": "#d9d9d9", "qsp": "#9ecae1", "out": "#fdae6b"}
    for j, source in enumerate(SOURCES):
        for i, (corpus, query) in enumerate(rows):
            y = len(rows) - 1 - i
            ax.add_patch(plt.Rectangle((j + 0.04, y + 0.06), 0.92, 0.88, color=colours[source]))
            ax.text(j + 0.5, y + 0.5, f"{corpus}-{query}-{source}", ha="center", va="center", fontsize=11)
    short = {"last": "last prompt token", "qsp": "query-span tokens", "out": "answer tokens"}
    ax.set_xticks([j + 0.5 for j in range(len(SOURCES))], [f"{s}\n({short[s]})" for s in SOURCES], fontsize=8)
    ax.set_yticks(
        [len(rows) - 0.5 - i for i in range(len(rows))], [f"{c} corpus\n{q} query" for c, q in rows], fontsize=8
    )
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_title("12 discovery settings = corpus x query x attention source", fontsize=10)
    return fig
