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
# # 02 · Overlap: how much do the 12 settings agree on which heads are "visual"?
#
# The paper's first finding: changing the attention source or the query type replaces much of the
# top-k head-set, changing the corpus much less, while two halves of the same discovery data agree
# almost perfectly. Here the same comparisons on the model in use, beside the paper's numbers
# (Qwen3-VL-8B, top-100 of 1,152 heads). Scores come from notebook 01's cache: no new forward passes.

# %% tags=["parameters"]
model = "toy"
device = "cpu"
dtype = "float32"
n_strips = 400
k = 0.087
k_crossover = None
key_agg = "raw"
row_agg = "mean"
batch_size = 16
n_splits = 200
seed = 0
smoke = False
out_dir = "../paper_figures"
cache_dir = "../.cache/results"

# %%

import numpy as np
import pandas as pd
from IPython.display import display

from helpers import params
from helpers.cache import ResultCache
from helpers.design import k_for
from helpers.discovery import all_setting_scores, discover_all
from helpers.engine import load_model
from helpers.figures import save_figure, save_table
from helpers.figures.overlap import factor_medians, plot_chance_overlap, plot_overlap_matrix, plot_top_k_curve
from helpers.overlap import (
    ceiling_table,
    half_split_overlaps,
    one_factor_pairs,
    overlap,
    overlap_matrix,
    random_overlaps,
    split_halves,
    top_k,
    top_k_curve,
)
from helpers.paths import REFERENCE

P = params.validate(
    dict(
        model=model,
        device=device,
        dtype=dtype,
        n_strips=n_strips,
        k=k,
        k_crossover=k_crossover,
        key_agg=key_agg,
        row_agg=row_agg,
        batch_size=batch_size,
        n_splits=n_splits,
        seed=seed,
        smoke=smoke,
        out_dir=out_dir,
        cache_dir=cache_dir,
    )
)
lm = load_model(P.model, device=P.device, dtype=P.dtype)
n_heads = len(lm.adapter.candidate_layers) * lm.adapter.n_heads
K = k_for(n_heads, P.k)
# the paper's top-20 of 1,152 heads, scaled to this model (at least 3 heads)
K_CROSS = k_for(n_heads, P.k_crossover) if P.k_crossover is not None else max(3, k_for(n_heads, 20 / 1152))
cache = ResultCache(P.cache_dir)
per_item = discover_all(lm, P.n_strips, P.seed, cache, P.batch_size)
item_scores = all_setting_scores(per_item, P.key_agg, P.row_agg)  # setting -> [N, L, H]
mean_scores = {s: v.mean(0) for s, v in item_scores.items()}
print(
    f"{n_heads} heads, top-{K} (paper: top-100 of 1,152), {P.n_strips} strips per corpus x query, "
    f"{P.n_splits} half-splits"
)

# %% [markdown]
# ## Figure 2: top-k overlap between all 12 settings

# %%
matrix = overlap_matrix(mean_scores, K)
fig = plot_overlap_matrix(matrix, K)
display(fig)
save_figure(fig, "fig02_overlap_matrix", P.out_dir)
save_table(matrix.reset_index(names="setting"), "fig02_overlap_matrix", P.out_dir, float_format="%d")
paper_pairs = pd.read_csv(REFERENCE / "figure02_overlap_pairs.csv")
paper_pairs["this run"] = [
    matrix.loc[a, b] if b in matrix else int(matrix.values[np.triu_indices(12, 1)].min())
    for a, b in zip(paper_pairs.a, paper_pairs.b.fillna(""))
]
paper_pairs["this run / k"] = paper_pairs["this run"] / K
display(paper_pairs)

# %% [markdown]
# ## Table 1: which factor moves the head-set most?
# Median overlap over the pairs of settings that differ in only one factor, beside the half-split
# agreement of each setting (mean over the splits of the overlap between its two halves' top-k).

# %%
splits = split_halves(P.n_strips, P.n_splits, P.seed)
ceilings = pd.Series({s: half_split_overlaps(v, v, K, splits).mean() for s, v in item_scores.items()})
table1 = factor_medians(matrix, ceilings, K)
paper = pd.read_csv(REFERENCE / "table01_overlap_medians.csv")
table1.insert(
    1, "paper (top-100 of 1,152)", paper.set_index("comparison").loc[table1.comparison, "paper_top100_overlap"].values
)
display(table1)
save_table(table1, "table01_overlap_by_factor", P.out_dir)
order = table1.set_index("comparison")["median overlap"]
print(
    "ordering source < query < corpus < half-split:",
    order["source"] < order["query"] < order["corpus"] < order["half-split"],
)

# %% [markdown]
# ## Table 20: overlap at half the data against the half-split noise ceiling
# Setting A's top-k on one half of the strips vs. setting B's on the other half (the same split), the
# geometric mean of the two settings' own half-split ceilings, and their ratio.

# %%
pairs = [(a, b) for a, b in one_factor_pairs(matrix)[["a", "b"]].itertuples(index=False)]
table20 = ceiling_table(item_scores, pairs, K, P.n_splits, P.seed)
paper20 = pd.read_csv(REFERENCE / "table20_ceiling.csv")
table20 = table20.merge(paper20[["pair", "paper_shared", "paper_ceiling", "paper_fraction"]], on="pair", how="left")
table20 = table20.sort_values(["what changes", "fraction"]).reset_index(drop=True)
display(table20)
save_table(table20, "table20_overlap_vs_ceiling", P.out_dir)

# %% [markdown]
# ## Tables 2 / 21: crossover combinations against the native head-sets
# The native sets are the three combinations used in earlier work (ordinal + last token, referring +
# query span, referring + output tokens); the crossovers are the other three, on the COCO-like corpus.

# %%
native = ["ord-last", "ref-qsp", "ref-out"]
crossover = ["ord-qsp", "ord-out", "ref-last"]
table21 = pd.DataFrame(
    [
        {
            "combination": c,
            **{
                f"native {n}": overlap(top_k(mean_scores[f"co-{c}"], K_CROSS), top_k(mean_scores[f"co-{n}"], K_CROSS))
                for n in native
            },
        }
        for c in crossover
    ]
)
paper21 = pd.read_csv(REFERENCE / "table21_crossover_top20.csv").set_index("combination")
table21["paper (top-20), same columns"] = [
    " / ".join(map(str, paper21.loc[c])) if c in paper21.index else "--" for c in table21.combination
]
print(f"top-{K_CROSS} overlap (paper: top-20 of 1,152)")
display(table21)
save_table(table21, "table21_crossover_overlap", P.out_dir)

# %% [markdown]
# ## Figure 6: cm-ref-qsp vs co-ref-qsp as k grows

# %%
ks = sorted({max(1, round(f * K)) for f in (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6)})
curve = top_k_curve(mean_scores["cm-ref-qsp"], mean_scores["co-ref-qsp"], ks)
fig = plot_top_k_curve(curve, "cm-ref-qsp", "co-ref-qsp")
display(fig)
save_figure(fig, "fig06_topk_curve_ref_qsp", P.out_dir)
save_table(curve, "fig06_topk_curve_ref_qsp", P.out_dir)

# %% [markdown]
# ## Figure 7: native head-sets against a uniform random draw (the chance line)

# %%
natives = {n: mean_scores[f"co-{n}"] for n in native}
between = pd.DataFrame(
    [
        {"pair": f"{a} vs {b}", "overlap": overlap(top_k(natives[a], K), top_k(natives[b], K))}
        for i, a in enumerate(native)
        for b in native[i + 1 :]
    ]
)
chance = {n: random_overlaps(s, K, 1000, P.seed) for n, s in natives.items()}
fig = plot_chance_overlap(between, chance, K, n_heads)
display(fig)
save_figure(fig, "fig07_chance_overlap", P.out_dir)
save_table(
    pd.concat([between, pd.DataFrame([{"pair": f"{n} vs random", "overlap": c.mean()} for n, c in chance.items()])]),
    "fig07_chance_overlap",
    P.out_dir,
)
