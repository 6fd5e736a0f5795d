"""The paper's Tables 28 (protocol per result: N and R) and 29 (benchmark conversion recipes), made from the
code that sets them: the notebooks' size parameters, helpers/sizes.py (R per analysis, the "paper"
profile's sizes) and the converters' registry (helpers/stimuli/pointing_convert.py). Notebook 00 shows and
writes both beside the paper's values (paper_figures/reference/table28_protocol.csv, table29_conversion.csv).
"""

from types import SimpleNamespace

import pandas as pd

from helpers import sizes
from helpers.runner.params import declared_parameters
from helpers.stimuli.design import k_for
from helpers.stimuli.pointing_convert import RECIPES, SHOWN

PAPER_HEADS = 1152  # Qwen3-VL-8B's candidate heads: the paper's k are counts of these
RECIPE_NAMES = {"overlay": "same-image overlay", "retrieval": "image retrieval"}
MISMATCHED_ARM = {"overlay": "the photo with no option overlaid", "retrieval": "a blank grey cell"}


def notebook_sizes(notebook: str, profile: str) -> SimpleNamespace:
    """The size parameters `notebook` runs with under `profile` at its declared defaults (as
    helpers.runner.params.validate takes the "paper" profile's sizes; smoke not applied)."""
    values = {**declared_parameters(notebook), "profile": profile, "smoke": False}
    if profile == "paper":
        values.update({n: v for n, v in sizes.PAPER_SIZES.items() if n in values})
    return SimpleNamespace(**values)


def _r(p, analysis: str, large: str | None = None) -> str:
    """R of `analysis`, with the referring + query-span (or k = 100) R in parentheses where it differs."""
    r = sizes.n_random(p, analysis)
    other = sizes.n_random(p, analysis, "cm-ref-qsp") if large is None else sizes.n_random(p, large)
    return f"{r} ({other})" if other != r else str(r)


def _ks(p) -> str:
    return ", ".join(str(k_for(PAPER_HEADS, share)) for share in p.ks)


# (result, notebook, head-set, evaluation data, N, R): the paper's Table 28 rows first (their `result` as the
# paper's), then further analyses with their own sizes. N and R are functions of the notebook's sizes.
ROWS = (
    ("Tables 1, 20 (noise ceiling)", "02_overlap", lambda p: "flat top-100",
     lambda p: f"discovery strips, {p.n_splits} half-splits", lambda p: p.n_strips, lambda p: "-"),
    ("Tables 2, 21; Fig. 7", "02_overlap", lambda p: "top-20; top-100",
     lambda p: "COCO strips (discovery only)", lambda p: p.n_strips, lambda p: "-"),
    ("Table 3, Fig. 3, Tables 9, 11", "04_ncs", lambda p: "flat top-100",
     lambda p: "2x2 grid (CERS); MCQ (NCS)", lambda p: p.n_items, lambda p: _r(p, "table03_ncs")),
    ("Table 4, 14, Fig. 5", "05_controls", lambda p: f"flat top-k, k in {{{_ks(p)}}}",
     lambda p: "MCQ", lambda p: p.n_items, lambda p: _r(p, "table14", "table14_k100")),
    ("Table 12", "05_controls", lambda p: "6 head-sets",
     lambda p: "MCQ + text-solvable arm", lambda p: p.n_items, lambda p: "-"),
    ("Tables 5, 13", "05_controls", lambda p: "flat top-100; k_per_layer=3",
     lambda p: "MCQ (CERS: grid)", lambda p: p.n_items, lambda p: _r(p, "table13")),
    ("Tables 6, 16", "04_ncs", lambda p: "flat top-100",
     lambda p: "2x2 grid, a cell hidden", lambda p: sizes.n_items(p, "table06"), lambda p: _r(p, "table06")),
    ("Table 10", "05_controls", lambda p: "flat top-100 (ref-qsp)",
     lambda p: "MCQ", lambda p: p.n_items, lambda p: _r(p, "table10")),
    ("Table 16 per model", "06_cross_model", lambda p: "flat top-100",
     lambda p: "2x2 grid, a cell hidden", lambda p: p.n_items, lambda p: p.n_random_grid),
    ("Table 18", "03_cers", lambda p: "flat top-100",
     lambda p: f"2x2 grid, beta in {p.betas}", lambda p: sizes.n_items(p, "table18"),
     lambda p: min(sizes.n_random(p, "table18"), sizes.n_random(p, "table03_cers"))),
    ("Table 19", "06_cross_model", lambda p: "flat top-100",
     lambda p: "MCQ", lambda p: p.n_items, lambda p: p.n_random),
    ("Tables 23, 26, 27", "06_cross_model", lambda p: "flat top-100 (paper: top-20)",
     lambda p: "pointing tasks (N per task)", lambda p: p.n_pointing, lambda p: 1),
)  # fmt: skip


def protocol_table() -> pd.DataFrame:
    """Table 28: per result, the notebook, head-set, evaluation data and N, R under each of this project's profiles
    (the "paper" profile is this project's choice of sizes; the paper's own N and R per table are the reference
    columns notebook 00 joins beside them)."""
    out = []
    for result, notebook, head_set, data, n, r in ROWS:
        row = {"result": result, "notebook": notebook}
        for profile in sizes.PROFILE_NAMES:
            p = notebook_sizes(notebook, profile)
            if profile == "default":
                row |= {"head-set": head_set(p), "evaluation data": data(p)}
            row |= {f"N ({profile} profile)": n(p), f"R ({profile} profile)": str(r(p))}
        out.append(row)
    return pd.DataFrame(out)


def conversion_table() -> pd.DataFrame:
    """Table 29: per converted benchmark, its task, recipe, what the four cells show, the mismatched arm."""
    return pd.DataFrame(
        [
            {
                "benchmark": name,
                "task": f"{name}_pointing",
                "recipe": RECIPE_NAMES[recipe],
                "cells": SHOWN[recipe],
                "mismatched arm": MISMATCHED_ARM[recipe],
            }
            for name, recipe in RECIPES.items()
        ]
    )
