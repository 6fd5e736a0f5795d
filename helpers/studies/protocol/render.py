"""A report card as files: report.md, a self-contained report.html and card.json (its numbers)."""

import base64
import io
import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

SECTIONS = [
    ("provenance", "Provenance", "the model, how the head-set was discovered, its half-split noise ceiling"),
    ("audit", "Baseline audit of the evaluation data", "clean P(correct) with a 95% t-interval over items"),
    ("necessity", "Necessity", "NCS and NCS_grid (95% t-intervals over items) against layer-matched random sets"),
    ("steerability", "Steerability", "CERS at the chosen beta against layer-matched and any-layer random sets"),
    ("sweep", "CERS against beta", "S and its first layer-matched random sets (mean, min, max)"),
    (
        "damage",
        "Generic damage",
        "matched / mismatched drops with the image hidden; text-arm drop with the text hidden",
    ),
    (
        "row_groups",
        "Where necessity acts",
        "NCS with the image hidden from S at every row, question + option rows, the last row",
    ),
    (
        "schemes",
        "Control scheme",
        "NCS against the random sets of the field's control scheme given with --controls (bottom5: the lowest 5% "
        "of the discovery score; same-band: S's count per third of the layers; uniform: from all heads)",
    ),
]
OPTIONAL_SECTIONS = ("schemes",)  # shown only when the card has rows for them


def _cell(value) -> str:
    if isinstance(value, (float, np.floating)):
        return "--" if np.isnan(value) else f"{value:.3f}"
    return str(value).replace("|", "/")


def markdown_table(df: pd.DataFrame) -> str:
    """A pipe table of `df` (floats to 3 decimals, NaN as --)."""
    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def _header(card: dict) -> list[str]:
    meta, sizes = card["meta"], card["meta"]["sizes"]
    copies = sum(meta["forward copies"].values())
    lines = []
    if "other model's head-sets" in meta:
        named = ", ".join(f"{name} (model {model})" for name, model in meta["other model's head-sets"].items())
        lines.append(f"Head-sets discovered on another model, carded on {meta['model']} on purpose: {named}.")
    return lines + [
        f"model {meta['model']} (weights {meta['weights fingerprint']}), profile {meta['profile']}: "
        f"N = {sizes['n_items']} evaluation items of corpus {meta['eval corpus']}, R = {sizes['n_random']} "
        f"layer-matched and {sizes['n_random_any']} any-layer random sets, beta = {meta['beta']:g}, "
        f"seed {meta['seed']}; "
        f"{copies:,} forward copies, {meta['seconds']:.0f} s",
    ]


def to_markdown(card: dict, figure_name: str | None = None) -> str:
    meta = card["meta"]
    out = [f"# Report card: {', '.join(meta['head-sets'])}", "", *_header(card), "", "## Verdicts", ""]
    out += [markdown_table(card["verdicts"]), "", "## Conclusion", "", *[f"- {line}" for line in card["conclusion"]]]
    if figure_name:
        out += ["", f"![S against its random sets](../{figure_name}.png)"]
    for key, title, caption in SECTIONS:
        if key in OPTIONAL_SECTIONS and not len(card.get(key, [])):
            continue
        out += ["", f"## {title}", "", f"{caption}.", "", markdown_table(card[key])]
    return "\n".join(out) + "\n"


def to_html(card: dict, fig: plt.Figure | None = None) -> str:
    """A self-contained HTML page of the card (the figure embedded as a PNG)."""
    meta = card["meta"]
    body = [f"<h1>Report card: {', '.join(meta['head-sets'])}</h1>", *[f"<p>{line}</p>" for line in _header(card)]]
    body += ["<h2>Verdicts</h2>", card["verdicts"].to_html(index=False, classes="verdicts", border=0)]
    body += ["<h2>Conclusion</h2>", "<ul>", *[f"<li>{line}</li>" for line in card["conclusion"]], "</ul>"]
    if fig is not None:
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
        encoded = base64.b64encode(buffer.getvalue()).decode()
        body.append(f'<img alt="S against its random sets" src="data:image/png;base64,{encoded}">')
    for key, title, caption in SECTIONS:
        if key in OPTIONAL_SECTIONS and not len(card.get(key, [])):
            continue
        body += [
            f"<h2>{title}</h2>",
            f"<p>{caption}.</p>",
            card[key].to_html(index=False, float_format="%.3f", na_rep="--", border=0),
        ]
    style = (
        "body{font-family:sans-serif;max-width:1200px;margin:auto}table{border-collapse:collapse;font-size:13px}"
        "td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left}img{max-width:100%}"
    )
    head = f"<head><meta charset='utf-8'><title>Report card</title><style>{style}</style></head>"
    return f"<!DOCTYPE html><html>{head}<body>{''.join(body)}</body></html>\n"


def write_report(
    card: dict, folder: Path, fig: plt.Figure | None = None, figure_name: str | None = None
) -> list[Path]:
    """report.md, report.html and card.json (the card's numbers) into `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    md, html, record = folder / "report.md", folder / "report.html", folder / "card.json"
    md.write_text(to_markdown(card, figure_name))
    html.write_text(to_html(card, fig))
    tables = {key: value.to_dict(orient="records") for key, value in card.items() if isinstance(value, pd.DataFrame)}
    record.write_text(
        json.dumps({"meta": card["meta"], "conclusion": card["conclusion"], **tables}, indent=1, default=float)
    )
    return [md, html, record]
