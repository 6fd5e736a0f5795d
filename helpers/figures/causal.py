"""Figures of notebooks 03 (CERS) and 04 (NCS): discovered head-sets against their random controls."""

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from helpers.measures.verdicts import BEATS, NOT_INTERPRETABLE, WITHIN, two_readings

# The colour of each outcome of verdicts.versus_random, in every figure that colours a verdict.
VERDICT_COLOURS = {BEATS: "#d62728", WITHIN: "#1f77b4", NOT_INTERPRETABLE: "#9e9e9e"}
# A set against its own random sets, in the words of the paper's Figure 3 ("outside the random band").
PER_SET_WORDS = {
    BEATS: "beats its random sets (unadjusted)",
    WITHIN: "within its random sets",
    NOT_INTERPRETABLE: "not interpretable",
}


def plot_against_random(table: pd.DataFrame, score: str, any_layer: pd.DataFrame | None = None) -> plt.Figure:
    """Figure 3 (one panel): each setting's discovered set S (dot, with its 95% interval) against the
    mean +- SD of its layer-matched random sets (bar) and, when given, the any-layer random sets. Read as the paper
    reads it (verdicts.two_readings): each dot coloured by its set against its own random sets (unadjusted rank p,
    VERDICT_COLOURS), ringed where it also survives Holm across the panel's settings; below the axes, where they
    cover no interval or band, the legend and, as its title, a note on the family-wise reading's floor at this R.

    table: one row per setting with columns setting, S, S low, S high, random mean, random sd, random min,
    random max, R, p."""
    fig, ax = plt.subplots(figsize=(8.5, 4.4), layout="constrained")
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
    readings = two_readings(table)
    ax.errorbar(
        x,
        table["S"],
        yerr=[table["S"] - table["S low"], table["S high"] - table["S"]],
        fmt="none",
        ecolor="#444444",
        lw=1,
    )
    for outcome, colour in VERDICT_COLOURS.items():
        shown = np.array([c.outcome == outcome for c in readings.per_set])
        if shown.any():
            label = f"discovered S (95% CI): {PER_SET_WORDS[outcome]}"
            if outcome == NOT_INTERPRETABLE:
                reasons = dict.fromkeys(c.reason for c in readings.per_set if c.outcome == outcome)
                label += f" ({'; '.join(reasons)})"
            ax.scatter(x[shown], table["S"][shown], c=colour, zorder=3, s=28, label=label)
    held = np.array([c.outcome == BEATS for c in readings.family])
    if held.any():
        label = f"also beats them after Holm across the {len(table)} settings"
        ax.scatter(
            x[held], table["S"][held], facecolors="none", edgecolors="black", lw=1.4, s=90, zorder=4, label=label
        )
    ax.axhline(0, color="black", lw=0.6)
    ax.set_xticks(x, table["setting"], rotation=45, ha="right", fontsize=8)
    ax.set_ylabel(score)
    ax.set_title(f"{score}: discovered head-sets against layer-matched random head-sets")
    fig.legend(loc="outside lower center", ncol=2, fontsize=7, frameon=False, title=readings.note(), title_fontsize=7)
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


def _show_item(ax, item, title: str, boxes: dict[str, str]) -> None:
    """The item's image with chosen regions outlined: {box name: colour}."""
    ax.imshow(item.image)
    for name, colour in boxes.items():
        x0, y0, x1, y1 = item.boxes[name]
        ax.add_patch(plt.Rectangle((x0 - 0.5, y0 - 0.5), x1 - x0, y1 - y0, fill=False, ec=colour, lw=2))
    ax.set_title(title, fontsize=8)
    ax.axis("off")


def plot_grid_contrast(example: dict, labels: list[str]) -> plt.Figure:
    """Figure 1, step 2: one grid item, and P(c) for each set (`labels`) with a distractor's cell hidden
    from it and with the answer's cell hidden (example: helpers.studies.example_item.grid_contrast)."""
    item, letters = example["item"], ("A", "B", "C", "D")
    c, d = letters[item.correct], letters[example["distractor"]]
    fig, (image_ax, ax) = plt.subplots(1, 2, figsize=(7.5, 3.3), gridspec_kw={"width_ratios": [1, 1.6]})
    _show_item(image_ax, item, f"answer {c} (green), distractor {d} (orange)", {c: "#2ca02c", d: "#ff7f0e"})
    x = np.arange(len(labels))
    ax.bar(x - 0.18, example["p d hidden"], width=0.36, color="#ff7f0e", label=f"ρ({d}) hidden (distractor)")
    ax.bar(x + 0.18, example["p c hidden"], width=0.36, color="#2ca02c", label=f"ρ({c}) hidden (answer)")
    ax.axhline(example["p clean"], color="black", lw=0.8, ls="--", label="clean")
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("P(correct)")
    ax.set_title("NCS_grid on one item: P(c) with one cell hidden from the set", fontsize=9)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3, frameon=False)
    fig.tight_layout()
    return fig


def plot_causal_example(example: dict, setting: str, beta: float) -> plt.Figure:
    """Figure 8: the CERS grid steered to the answer's cell and to a distractor's (P(A..D)), and the NCS
    arms' single images clean and with the image hidden from S (P(correct)); example from
    helpers.studies.example_item.causal_example."""
    grid, letters = example["grid"], ("A", "B", "C", "D")
    c, d = letters[grid.correct], letters[example["distractor"]]
    fig, axes = plt.subplots(1, 4, figsize=(12, 3.0), gridspec_kw={"width_ratios": [1, 1.4, 0.8, 0.8]})
    _show_item(axes[0], grid, f"CERS grid: answer {c}, distractor {d}", {c: "#2ca02c", d: "#ff7f0e"})
    x = np.arange(4)
    for offset, key, colour, label in (
        (-0.27, "p clean", "#9e9e9e", "clean"),
        (0.0, "p to c", "#2ca02c", f"do(S → {c})"),
        (0.27, "p to d", "#ff7f0e", f"do(S → {d})"),
    ):
        axes[1].bar(x + offset, example[key], width=0.27, color=colour, label=label)
    axes[1].set_xticks(x, letters)
    axes[1].set_ylim(0, 1.05)
    axes[1].set_ylabel("P(letter)")
    axes[1].set_title(f"{setting} steered, β = {beta:g}", fontsize=8)
    axes[1].legend(fontsize=7)
    for ax, arm in zip(axes[2:], ("matched", "mismatched")):
        single = example["single"][arm]
        ax.imshow(single["item"].image)
        ax.set_title(
            f"{arm}: P(correct)\nclean {single['p clean']:.2f}, image hidden from S {single['p masked']:.2f}",
            fontsize=8,
        )
        ax.axis("off")
    fig.tight_layout()
    return fig
