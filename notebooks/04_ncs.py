# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 · Necessity (NCS): does hiding the image from the discovered heads hurt the answer?
#
# Each discovered head-set S has the image hidden from its heads on a single-image MCQ, in two arms
# with the same options: matched (the image shows the correct option) and mismatched (it shows a class
# outside the options). drop = P_clean(c) − P_masked(c); NCS = drop(matched) − drop(mismatched), so
# damage that masking does to any prompt cancels. The paper's second finding: necessity follows the
# attention source — query-span (and output-token) sets are necessary, last-token sets are not — and
# it separates the settings against layer-matched random sets, where steering (notebook 03) does not.

# %% tags=["parameters"]
model = "toy"
device = "cpu"
dtype = "float32"
eval_corpus = "co"
n_items = 100
n_random = 20
n_boot = 2000
rows = "all"
batch_size = 64
seed = 0
smoke = False
out_dir = "../paper_figures"
cache_dir = "../.cache/results"

# %%

import numpy as np
import pandas as pd
from IPython.display import display

from helpers import headsets, params
from helpers.cache import ResultCache
from helpers.controls import layer_matched_controls, with_controls
from helpers.design import SETTINGS, parse_setting
from helpers.engine import HIDE, load_model
from helpers.figures import save_figure, save_table
from helpers.figures.causal import plot_against_random
from helpers.necessity import drop, ncs, necessity_run
from helpers.paths import REFERENCE
from helpers.stats import against_random, holm, paired_t
from helpers.steering import ncs_grid, steering_run

P = params.validate(
    dict(
        model=model,
        device=device,
        dtype=dtype,
        eval_corpus=eval_corpus,
        n_items=n_items,
        n_random=n_random,
        n_boot=n_boot,
        rows=rows,
        batch_size=batch_size,
        seed=seed,
        smoke=smoke,
        out_dir=out_dir,
        cache_dir=cache_dir,
    )
)
lm = load_model(P.model, device=P.device, dtype=P.dtype)
n_layers, n_heads = len(lm.adapter.candidate_layers), lm.adapter.n_heads
discovered = headsets.load_settings(P.out_dir / "headsets", SETTINGS, P.model, n_layers, n_heads)  # name -> [L, H]
K = int(next(iter(discovered.values())).sum())
layer_matched = layer_matched_controls(discovered, P.n_random, P.seed)  # the same draws as notebook 03
sets = {s: with_controls(S, layer_matched[s]) for s, S in discovered.items()}  # [1 + R, L, H]
cache = ResultCache(P.cache_dir)


def mask(s, row_group):
    """Cached necessity run of setting s's S and random sets, the image hidden at `row_group` rows."""
    return necessity_run(
        lm, P.eval_corpus, P.n_items, P.seed, sets[s], row_group, cache, sets_per_forward=P.batch_size
    )


print(
    f"{n_layers} x {n_heads} heads, top-{K} head-sets, {P.n_items} item pairs of corpus {P.eval_corpus!r}, "
    f"{P.n_random} layer-matched random sets, image hidden at rows {P.rows!r}"
)

# %% [markdown]
# ## Table 3 (NCS half) and Table 11 (its two arms)
# S's NCS with a paired percentile bootstrap over item pairs; the random sets' mean with a t-interval
# over the draws; p = rank p among the layer-matched sets, Holm-adjusted across the 12 settings;
# z = distance from the random sets' mean in their SD.

# %%
runs = {s: mask(s, P.rows) for s in SETTINGS}
table3 = pd.DataFrame(
    [
        {"setting": s, **against_random(ncs(run)[:, 0], ncs(run)[:, 1:], "bootstrap", P.n_boot, P.seed)}
        for s, run in runs.items()
    ]
)
table3.insert(table3.columns.get_loc("p") + 1, "p Holm", holm(table3["p"]))
paper3 = pd.read_csv(REFERENCE / "table03_ncs.csv")
shown = table3.merge(
    paper3[["setting", "paper_NCS", "paper_random_mean", "paper_p", "paper_source"]], on="setting", how="left"
)
display(shown.round(3))
save_table(shown, "table03_ncs", P.out_dir)

arms = []
for s, run in runs.items():
    row = {"setting": s}
    for arm in ("matched", "mismatched"):
        correct = run[f"{arm}_correct"]
        row[f"P clean {arm}"] = np.take_along_axis(run[f"{arm}_p_clean"], correct[:, None], 1).mean()
        row[f"P masked {arm}"] = np.take_along_axis(run[f"{arm}_p_masked"][:, 0], correct[:, None], 1).mean()
        row[f"{arm} drop"] = drop(run, arm)[:, 0].mean()
    row["NCS"] = row["matched drop"] - row["mismatched drop"]
    arms.append(row)
table11 = pd.DataFrame(arms).merge(pd.read_csv(REFERENCE / "table11_ncs_arms.csv"), on="setting", how="left")
display(table11.round(3))
save_table(table11, "table11_ncs_arms", P.out_dir)

# %% [markdown]
# ## Figure 3 (NCS panel): discovered sets against their random bands

# %%
fig = plot_against_random(table3, "NCS")
display(fig)
save_figure(fig, "fig03_ncs", P.out_dir)

# %% [markdown]
# ## Necessity follows the attention source: query-span vs. last-token sets
# Per item pair, the mean NCS of the four query-span sets against the mean of the four last-token sets
# (paired t-test over items; the paper: difference 0.083, p = 6e-10). Output-token sets beside them.

# %%
by_source = {
    src: np.mean([ncs(runs[s])[:, 0] for s in SETTINGS if parse_setting(s).source == src], axis=0)
    for src in ("qsp", "out", "last")
}  # source -> [N]
contrast = pd.DataFrame(
    [
        {
            "comparison": f"{a} - {b}",
            "mean difference": paired_t(by_source[a], by_source[b])[0],
            "p (paired t)": paired_t(by_source[a], by_source[b])[1],
        }
        for a, b in (("qsp", "last"), ("out", "last"), ("qsp", "out"))
    ]
)
display(contrast)
save_table(contrast, "ncs_source_contrast", P.out_dir, float_format="%.3g")

# %% [markdown]
# ## Table 5: at which query rows does necessity act?
# The COCO-like settings' S masked from the image at every row, only at the prompt's question and
# option rows, or only at the last row, each against its layer-matched random sets.

# %%
row_settings = ["co-ref-qsp", "co-ord-qsp", "co-ref-last", "co-ord-last"]
table5 = []
for s in row_settings:
    row = {"setting": s}
    for group in ("all", "prompt", "last"):
        values = ncs(mask(s, group))
        result = against_random(values[:, 0], values[:, 1:], "bootstrap", P.n_boot, P.seed)
        row.update(
            {
                f"{group}": result["S"],
                f"{group} low": result["S low"],
                f"{group} high": result["S high"],
                f"{group} p": result["p"],
            }
        )
    table5.append(row)
table5 = pd.DataFrame(table5).merge(pd.read_csv(REFERENCE / "table05_ncs_rows.csv"), on="setting", how="left")
display(table5.round(3))
save_table(table5, "table05_ncs_rows", P.out_dir)

# %% [markdown]
# ## Table 6: necessity as a region contrast on the grid
# NCS_grid = P(c | a distractor's cell hidden from S) − P(c | the target cell hidden from S): generic
# damage cancels within each item. Against the same layer-matched random sets.

# %%
table6 = []
for s in SETTINGS:
    values = ncs_grid(
        steering_run(lm, P.eval_corpus, P.n_items, P.seed, sets[s], HIDE, P.rows, cache, sets_per_forward=P.batch_size)
    )
    table6.append({"setting": s, **against_random(values[:, 0], values[:, 1:])})
table6 = pd.DataFrame(table6)
setting_parts = table6.setting.str.split("-", n=1, expand=True)
paper6 = pd.read_csv(REFERENCE / "table06_ncs_grid.csv").set_index("query_source")
table6["paper NCS_grid"] = [paper6[f"paper_{c}_NCS_grid"].get(qs, np.nan) for c, qs in setting_parts.values]
table6["paper p"] = [paper6[f"paper_{c}_p"].get(qs, np.nan) for c, qs in setting_parts.values]
display(table6.round(3))
save_table(table6, "table06_ncs_grid", P.out_dir)
fig = plot_against_random(table6, "NCS_grid")
display(fig)
save_figure(fig, "fig06_ncs_grid", P.out_dir)
