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
# per setting under `out_dir/headsets/`, the score maps of all settings and a Figure 1-style view of
# one strip.

# %% tags=["parameters"]
model = "toy"
device = "cpu"
dtype = "float32"
n_strips = 400
k = 0.087
key_agg = "raw"
row_agg = "mean"
batch_size = 16
seed = 0
smoke = False
interactive = False
out_dir = "../paper_figures"
cache_dir = "../.cache/results"

# %%

import numpy as np
import pandas as pd
from IPython.display import display

from helpers import headsets, params
from helpers.cache import ResultCache
from helpers.design import k_for
from helpers.discovery import all_setting_scores, discover_all, panel_profile
from helpers.engine import load_model
from helpers.figures import save_figure, save_table
from helpers.figures.discovery import plot_score_maps, plot_strip_overview
from helpers.overlap import top_k, top_k_per_layer
from helpers.stimuli import load_corpus, strip_items

P = params.validate(
    dict(
        model=model,
        device=device,
        dtype=dtype,
        n_strips=n_strips,
        k=k,
        key_agg=key_agg,
        row_agg=row_agg,
        batch_size=batch_size,
        seed=seed,
        smoke=smoke,
        interactive=interactive,
        out_dir=out_dir,
        cache_dir=cache_dir,
    )
)
lm = load_model(P.model, device=P.device, dtype=P.dtype)
A = lm.adapter
n_heads = len(A.candidate_layers) * A.n_heads
K = k_for(n_heads, P.k)
K_PER_LAYER = max(1, round(K / len(A.candidate_layers)))
print(
    f"{P.model}: {A.family}, {len(A.candidate_layers)} candidate layers x {A.n_heads} heads = {n_heads} heads; "
    f"flat top-{K} ({K / n_heads:.1%}), top-{K_PER_LAYER} per layer"
)

# %% [markdown]
# ## Per-item scores
# One greedy generation and one teacher-forced forward per strip serve all three sources.

# %%
cache = ResultCache(P.cache_dir)
per_item = discover_all(lm, P.n_strips, P.seed, cache, P.batch_size)
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
display(accuracy)
save_table(accuracy, "discovery_accuracy", P.out_dir)

# %% [markdown]
# ## Head-sets of the 12 settings

# %%
item_scores = all_setting_scores(per_item, P.key_agg, P.row_agg)  # setting -> [N, L, H]
mean_scores = {s: v.mean(0) for s, v in item_scores.items()}  # [L, H] each
rows = []
for s, scores in mean_scores.items():
    flat, per_layer = top_k(scores, K), top_k_per_layer(scores, K_PER_LAYER)
    headsets.save(
        P.out_dir / "headsets" / f"{s}.json",
        model=P.model,
        setting=s,
        selection=f"flat top-{K} ({P.key_agg} mass, {P.row_agg} over rows)",
        mask=flat,
        scores=scores,
    )
    headsets.save(
        P.out_dir / "headsets" / f"{s}_per_layer.json",
        model=P.model,
        setting=s,
        selection=f"top-{K_PER_LAYER} per layer",
        mask=per_layer,
        scores=scores,
    )
    rows.append(
        {
            "setting": s,
            "mean score (all heads)": scores.mean(),
            f"mean score (top-{K})": scores[flat].mean(),
            "layers of the top-k": " ".join(str(l) for l in sorted(set(np.nonzero(flat)[0]))),
            "best head": "L{}H{}".format(*np.unravel_index(scores.argmax(), scores.shape)),
        }
    )
summary = pd.DataFrame(rows)
display(summary)
save_table(summary, "discovery_headsets", P.out_dir)
long = pd.DataFrame(
    [
        {"setting": s, "layer": l, "head": h, "score": v[l, h]}
        for s, v in mean_scores.items()
        for l in range(v.shape[0])
        for h in range(v.shape[1])
    ]
)
long.to_csv(P.out_dir / "discovery_scores.csv", index=False, float_format="%.6f")

# %%
fig = plot_score_maps(mean_scores, K)
display(fig)
save_figure(fig, "discovery_score_maps", P.out_dir)

# %% [markdown]
# ## One strip, three attention sources (Figure 1, step 1)
# The top-k heads of each `cm-ord-*` setting, and how much attention they send to each panel of one
# held-out strip from their own source rows.

# %%
item = strip_items(load_corpus("cm"), 1, P.seed + 1, "ord")[0]
profile = panel_profile(lm, item, {src: top_k(mean_scores[f"cm-ord-{src}"], K) for src in ("last", "qsp", "out")})
fig = plot_strip_overview(item, profile, "cm-ord", K)
display(fig)
save_figure(fig, "discovery_strip_overview", P.out_dir)
