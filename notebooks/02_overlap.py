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
# The paper reports, as its first finding, that changing the attention source or the query type replaces
# much of the top-k head-set, changing the corpus much less, and that two halves of the same discovery
# data agree almost perfectly (Qwen3-VL-8B, top-100 of 1,152 heads). Here the same comparisons on the
# model in use, beside the paper's numbers; the sentences under Table 1 say, from this run's numbers,
# which of these hold here. Scores come from notebook 01's cache: no new forward passes.

# %% tags=["parameters"]
model = "toy"
profile = "default"  # both profiles run the paper's 400 strips per corpus x query and 200 half-splits
device = "cpu"
dtype = "float32"
n_strips = 400
k = None  # the paper's share of the heads (100 of 1,152); or an int, or a share 0 < k < 1
k_crossover = None
key_agg = "raw"
row_agg = "mean"
strips_per_forward = 16
n_splits = 200
seed = 0
interactive = False
smoke = False
out_dir = None
data_dir = None
cache_dir = None

# %%
import numpy as np
import pandas as pd

from helpers.engine import load_model
from helpers.figures.overlap import plot_chance_overlap, plot_overlap_matrix, plot_top_k_curve
from helpers.measures.discovery import all_setting_scores, discover_all
from helpers.measures.overlap import (
    NATIVE_COMBINATIONS,
    ceiling_table,
    crossover_overlaps,
    factor_medians,
    half_split_overlaps,
    one_factor_pairs,
    overlap,
    overlap_matrix,
    random_overlaps,
    split_halves,
    top_k,
    top_k_curve,
)
from helpers.runner import params, report
from helpers.stimuli.design import k_for
from helpers.storage.cache import ResultCache
from helpers.studies import claims, findings

P = params.gather(globals(), "02_overlap")
lm = load_model(P.model, device=P.device, dtype=P.dtype)
n_heads = len(lm.adapter.candidate_layers) * lm.adapter.n_heads
k_top = k_for(n_heads, P.k)
# the paper's top-20 of 1,152 heads, scaled to this model (at least 3 heads)
k_cross = k_for(n_heads, P.k_crossover) if P.k_crossover is not None else max(3, k_for(n_heads, 20 / 1152))
cache = ResultCache(P.cache_dir)
per_item = discover_all(lm, P.n_strips, P.seed, cache, P.strips_per_forward)
item_scores = all_setting_scores(per_item, P.key_agg, P.row_agg)  # setting -> [N, L, H]
mean_scores = {s: v.mean(0) for s, v in item_scores.items()}
print(
    f"{n_heads} heads, top-{k_top} (paper: top-100 of 1,152), {P.n_strips} strips per corpus x query, "
    f"{P.n_splits} half-splits"
)

# %% [markdown]
# ## Figure 2: top-k overlap between all 12 settings

# %%
matrix = overlap_matrix(mean_scores, k_top)
fig = plot_overlap_matrix(matrix, k_top)
report.figure(fig, "fig02_overlap_matrix", P.out_dir)
report.table(matrix.reset_index(names="setting"), "fig02_overlap_matrix", P.out_dir, float_format="%d")
paper_pairs = report.reference("figure02_overlap_pairs")
paper_pairs["this run"] = [
    matrix.loc[a, b] if b in matrix else int(matrix.values[np.triu_indices(12, 1)].min())
    for a, b in zip(paper_pairs.a, paper_pairs.b.fillna(""))
]
paper_pairs["this run / k"] = paper_pairs["this run"] / k_top
paper_pairs

# %% [markdown]
# ## Table 1: which factor moves the head-set most?
# Median overlap over the pairs of settings that differ in only one factor, beside the half-split
# agreement of each setting (mean over the splits of the overlap between its two halves' top-k).

# %%
splits = split_halves(P.n_strips, P.n_splits, P.seed)
ceilings = pd.Series({s: half_split_overlaps(v, v, k_top, splits).mean() for s, v in item_scores.items()})
table1 = factor_medians(matrix, ceilings, k_top)
paper = report.reference("table01_overlap_medians")
table1.insert(
    1, "paper (top-100 of 1,152)", paper.set_index("comparison").loc[table1.comparison, "paper_top100_overlap"].values
)
table1 = report.table(table1, "table01_overlap_by_factor", P.out_dir)
print(findings.split_agreement_sentence(table1))
print(claims.sentences(P.out_dir, ("source overlap", "query overlap", "corpus overlap", "half-split overlap")))

# %% [markdown]
# ## Table 20: overlap at half the data against the half-split noise ceiling
# Setting A's top-k on one half of the strips vs. setting B's on the other half (the same split), the
# geometric mean of the two settings' own half-split ceilings, and their ratio.

# %%
pairs = [(a, b) for a, b in one_factor_pairs(matrix)[["a", "b"]].itertuples(index=False)]
table20 = ceiling_table(item_scores, pairs, k_top, P.n_splits, P.seed)
table20 = table20.sort_values(["what changes", "fraction"]).reset_index(drop=True)
table20 = report.table(
    table20,
    "table20_overlap_vs_ceiling",
    P.out_dir,
    "table20_ceiling",
    on="pair",
    columns=["paper_shared", "paper_ceiling", "paper_fraction"],
)

# %% [markdown]
# ## Tables 2 / 21: query + source combinations against the native head-sets
# The native sets are the three combinations of earlier work (ordinal + last token, referring + query span,
# referring + output tokens), top-k of the COCO-like scores over all strips. Each combination is discovered
# again on a crossover sample, the first half of the COCO-like strips (the paper: 200 COCO strips), and its
# top-k compared with each native set; `own native` is a native combination's overlap with its own native
# set, its agreement across the two samples (the paper's bold cells). The paper reports that the ordinal +
# output combination shares few heads with any native set (8, 8, 9 of 20) and that referring + output
# keeps 13 of 20 of its own native set.

# %%
n_sample = P.n_strips // 2
table21 = crossover_overlaps(item_scores, "co", k_cross, n_sample)
paper21 = report.reference("table21_crossover_top20").set_index("combination")
table21["paper (top-20), same columns"] = [
    " / ".join(map(str, paper21.loc[c])) if c in paper21.index else "--" for c in table21.combination
]
print(f"top-{k_cross} overlap (paper: top-20 of 1,152), combinations from {n_sample} of {P.n_strips} strips")
table21 = report.table(table21, "table21_crossover_overlap", P.out_dir)
print(findings.crossover_sentence(table21, k_cross))

# %% [markdown]
# ## Figure 6: cm-ref-qsp vs co-ref-qsp as k grows

# %%
ks = sorted({max(1, round(f * k_top)) for f in (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6)})
curve = top_k_curve(mean_scores["cm-ref-qsp"], mean_scores["co-ref-qsp"], ks)
fig = plot_top_k_curve(curve, "cm-ref-qsp", "co-ref-qsp")
report.figure(fig, "fig06_topk_curve", P.out_dir)
curve = report.table(curve, "fig06_topk_curve", P.out_dir)

# %% [markdown]
# ## Figure 7: native head-sets against a uniform random draw (the chance line)

# %%
natives = {n: mean_scores[f"co-{n}"] for n in NATIVE_COMBINATIONS}
between = pd.DataFrame(
    [
        {"pair": f"{a} vs {b}", "overlap": overlap(top_k(natives[a], k_top), top_k(natives[b], k_top))}
        for i, a in enumerate(NATIVE_COMBINATIONS)
        for b in NATIVE_COMBINATIONS[i + 1 :]
    ]
)
chance = {n: random_overlaps(s, k_top, 1000, P.seed) for n, s in natives.items()}
fig = plot_chance_overlap(between, chance, k_top, n_heads)
report.figure(fig, "fig07_chance_overlap", P.out_dir)
chance_table = pd.concat(
    [between, pd.DataFrame([{"pair": f"{n} vs random", "overlap": c.mean()} for n, c in chance.items()])]
)
chance_table = report.table(chance_table, "fig07_chance_overlap", P.out_dir)

# %% [markdown]
# ## Explorer (`interactive=True`)
# Pick a run, a setting and k: the score map with the set outlined, its overlap with a second setting,
# one strip under a chosen head's attention, and the set's NCS / CERS against its random sets.

# %%
if P.interactive:
    from helpers.studies.explorer import show_explorer

    show_explorer(model=P.model, device=P.device, dtype=P.dtype, cache_dir=P.cache_dir)
