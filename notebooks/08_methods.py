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
# # 08 · The field's published methods: which heads does each one call "visual"?
#
# Seven published discovery methods, each re-implemented from its authors' code (helpers/measures/methods: every
# module cites the repository, file and function, and states its deviations), score every head on the project's
# strips; two causal references score the same heads by what removing them does to P(correct): exact single-head
# ablation and attribution patching. Below: each method's facts, its top-k set's overlap with the others and with
# the paper's 12 discovery settings (notebook 01's cache), and how well each score ranks heads like the ablation.

# %% tags=["parameters"]
model = "toy"
profile = "default"
device = "cpu"
dtype = "float32"
n_strips = 400  # the 12 settings' discovery runs (notebook 01's, read from the cache)
n_items = 40  # strips per method, split evenly over corpus x query
k = None  # the paper's share of the heads (100 of 1,152); or an int, or a share 0 < k < 1
key_agg = "raw"
row_agg = "mean"
strips_per_forward = 16
seed = 0
smoke = False
out_dir = None
data_dir = None
cache_dir = None

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from helpers.engine import load_model
from helpers.measures.discovery import all_setting_scores, discover_all
from helpers.measures.methods import CAUSAL_REFERENCES, FACTS, METHODS, rank_agreement
from helpers.measures.overlap import overlap, top_k
from helpers.runner import params, report
from helpers.stimuli.design import CORPORA, QUERIES, k_for
from helpers.stimuli.prepared import items_of
from helpers.storage.cache import ResultCache

P = params.gather(globals(), "08_methods")
lm = load_model(P.model, device=P.device, dtype=P.dtype)
n_heads = len(lm.adapter.candidate_layers) * lm.adapter.n_heads
k_top = k_for(n_heads, P.k)
per_combination = max(1, P.n_items // (len(CORPORA) * len(QUERIES)))
items = [item for c in CORPORA for q in QUERIES for item in items_of(f"strip_{q}", c, per_combination, P.seed)]
print(f"{n_heads} heads, top-{k_top}; {len(items)} strips per method ({per_combination} per corpus x query)")

# %% [markdown]
# ## What each method reads, and how its authors selected and validated heads

# %%
facts = pd.DataFrame([{"method": name, **vars(f)} for name, f in FACTS.items()])
facts = report.table(facts, "methods_facts", P.out_dir)

# %% [markdown]
# ## Every method's score on the same strips

# %%
scores, seconds = {}, {}
for name, method in METHODS.items():
    start = time.perf_counter()
    scores[name] = method(lm, items)
    seconds[name] = time.perf_counter() - start
fig, axes = plt.subplots(1, len(scores), figsize=(2.2 * len(scores), 3.2), sharey=True)
for ax, (name, score) in zip(axes, scores.items()):
    ax.imshow(score, aspect="auto", cmap="viridis")
    ax.set_title(name, fontsize=8)
    ax.set_xlabel("head")
axes[0].set_ylabel("layer")
report.figure(fig, "methods_score_maps", P.out_dir)

# %% [markdown]
# ## Top-k overlap: the methods against each other and against the paper's 12 settings

# %%
setting_scores = {
    s: v.mean(0)
    for s, v in all_setting_scores(
        discover_all(lm, P.n_strips, P.seed, ResultCache(P.cache_dir), P.strips_per_forward), P.key_agg, P.row_agg
    ).items()
}
sets = {name: top_k(score, k_top) for name, score in scores.items()}
columns = {**sets, **{s: top_k(v, k_top) for s, v in setting_scores.items()}}
matrix = pd.DataFrame({b: {a: overlap(sets[a], columns[b]) for a in sets} for b in columns})
fig, ax = plt.subplots(figsize=(0.45 * len(columns) + 2, 0.45 * len(sets) + 1.5))
sns.heatmap(matrix / k_top, annot=matrix, fmt="d", cmap="viridis", vmin=0, vmax=1, ax=ax, annot_kws={"fontsize": 7})
ax.set_title(f"Top-{k_top} overlap: methods (rows) vs methods and the 12 settings (colour: share of k)")
report.figure(fig, "methods_overlap", P.out_dir)
matrix = report.table(matrix.reset_index(names="method"), "methods_overlap", P.out_dir, float_format="%d")

# %% [markdown]
# ## Which scores rank heads like exact single-head ablation?
# Spearman's rank correlation over heads between each score and the mean drop in P(correct) when the head's
# output is zeroed; attribution patching is the first-order estimate of that drop.

# %%
ablation = scores["ablation"]
agreement = pd.DataFrame(
    [
        {
            "score": name,
            "kind": "causal estimate"
            if name in CAUSAL_REFERENCES
            else "paper setting"
            if name in setting_scores
            else "method",
            "spearman with ablation": rank_agreement(score, ablation),
            f"top-{k_top} overlap with ablation": overlap(columns[name], sets["ablation"]),
            "seconds": seconds.get(name, np.nan),
        }
        for name, score in {**scores, **{s: setting_scores[s] for s in setting_scores}}.items()
        if name != "ablation"
    ]
)
agreement = report.table(agreement, "methods_ablation_agreement", P.out_dir, on="score")
