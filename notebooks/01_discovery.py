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
# # 01 · Discovery: twelve ways to score "visual heads"
#
# For every strip, the model is asked about one of its six panels. A head's discovery score is the
# attention mass it sends from the chosen source rows (last prompt token, query-span tokens or its own
# answer tokens) to the image tokens of that panel, averaged over strips. Each of the 12 settings ranks
# the heads; its head-set is the flat top-`k` (paper: 100 of 1,152 heads) or the top heads of every layer.
#
# Outputs: per-item, per-head scores in the result cache (notebook 02 reuses them), one head-set file
# per setting under the run's `data_dir/headsets/` and the long score table `data_dir/discovery_scores.csv`
# (notebooks 03-05 read them), the score maps of all settings and a Figure 1-style view of one strip.

# %% tags=["parameters"]
model = "toy"
profile = "default"  # both profiles run the paper's 400 strips per corpus x query
device = "cpu"
dtype = "float32"
n_strips = 400
k = None  # the paper's share of the heads (100 of 1,152); or an int, or a share 0 < k < 1
key_agg = "raw"
row_agg = "mean"
strips_per_forward = 16
seed = 0
interactive = False
smoke = False
out_dir = None
data_dir = None
cache_dir = None

# %%
import math

import numpy as np
import pandas as pd

from helpers.engine import load_model
from helpers.figures.discovery import plot_score_maps, plot_strip_overview
from helpers.measures.discovery import all_setting_scores, discover_all, panel_profile
from helpers.measures.overlap import top_k, top_k_per_layer
from helpers.runner import params, report
from helpers.stimuli.corpora import load_corpus, strip_items
from helpers.stimuli.design import k_for
from helpers.storage import headsets, paths
from helpers.storage.cache import ResultCache

P = params.gather(globals(), "01_discovery")
lm = load_model(P.model, device=P.device, dtype=P.dtype)
adapter = lm.adapter
n_heads = len(adapter.candidate_layers) * adapter.n_heads
k_top = k_for(n_heads, P.k)
# per layer: the fewest heads per layer that hold at least the flat k (the paper's top-3 of 36 layers, 108 >= 100)
k_per_layer = math.ceil(k_top / len(adapter.candidate_layers))
print(
    f"{P.model}: {adapter.family}, {len(adapter.candidate_layers)} candidate layers x {adapter.n_heads} heads "
    f"= {n_heads} heads; "
    f"flat top-{k_top} ({k_top / n_heads:.1%}), top-{k_per_layer} per layer"
)

# %% [markdown]
# ## Per-item scores
# One greedy generation and one teacher-forced forward per strip serve all three sources.

# %%
cache = ResultCache(P.cache_dir)
per_item = discover_all(lm, P.n_strips, P.seed, cache, P.strips_per_forward)
accuracy = pd.DataFrame(
    [
        {
            "corpus": c,
            "query": q,
            "strips": len(v["correct"]),
            "greedy answer correct": v["correct"].mean(),
            "answer tokens (mean)": v["answer_tokens"].mean(),
        }
        for (c, q), v in per_item.items()
    ]
)
accuracy = report.table(accuracy, "discovery_accuracy", P.out_dir)

# %% [markdown]
# ## Head-sets of the 12 settings

# %%
item_scores = all_setting_scores(per_item, P.key_agg, P.row_agg)  # setting -> [N, L, H]
mean_scores = {s: v.mean(0) for s, v in item_scores.items()}  # [L, H] each
rows = []
for s, scores in mean_scores.items():
    flat, per_layer = top_k(scores, k_top), top_k_per_layer(scores, k_per_layer)
    headsets.save(
        P.data_dir / "headsets" / f"{s}.json",
        model=P.model,
        setting=s,
        selection=f"flat top-{k_top} ({P.key_agg} mass, {P.row_agg} over rows)",
        mask=flat,
        scores=scores,
    )
    headsets.save(
        P.data_dir / "headsets" / f"{s}_per_layer.json",
        model=P.model,
        setting=s,
        selection=f"top-{k_per_layer} per layer",
        mask=per_layer,
        scores=scores,
    )
    rows.append(
        {
            "setting": s,
            "mean score (all heads)": scores.mean(),
            f"mean score (top-{k_top})": scores[flat].mean(),
            "layers of the top-k": " ".join(str(l) for l in sorted(set(np.nonzero(flat)[0]))),
            "best head": "L{}H{}".format(*np.unravel_index(scores.argmax(), scores.shape)),
        }
    )
summary = pd.DataFrame(rows)
summary = report.table(summary, "discovery_headsets", P.out_dir)
long = pd.DataFrame(
    [
        {"setting": s, "layer": l, "head": h, "score": v[l, h]}
        for s, v in mean_scores.items()
        for l in range(v.shape[0])
        for h in range(v.shape[1])
    ]
)
print("wrote", paths.shown(headsets.save_scores(long, P.data_dir / "discovery_scores.csv")))

# %%
fig = plot_score_maps(mean_scores, k_top)
report.figure(fig, "discovery_score_maps", P.out_dir)

# %% [markdown]
# ## One strip, three attention sources (Figure 1, step 1)
# The top-k heads of each `cm-ord-*` setting, and how much attention they send to each panel of one
# held-out strip from their own source rows.

# %%
item = strip_items(load_corpus("cm"), 1, P.seed + 1, "ord")[0]
profile = panel_profile(lm, item, {src: top_k(mean_scores[f"cm-ord-{src}"], k_top) for src in ("last", "qsp", "out")})
fig = plot_strip_overview(item, profile, "cm-ord", k_top)
report.figure(fig, "discovery_strip_overview", P.out_dir)

# %% [markdown]
# ## Explorer (`interactive=True`)
# Pick a run, a setting and k: the score map with the set outlined, its overlap with a second setting,
# one strip under a chosen head's attention, and the set's NCS / CERS against its random sets.

# %%
if P.interactive:
    from helpers.studies.explorer import show_explorer

    show_explorer(model=P.model, device=P.device, dtype=P.dtype, cache_dir=P.cache_dir)
