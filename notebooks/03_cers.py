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
# # 03 · Steerability (CERS): do the discovered heads steer better than random heads?
#
# Each discovered head-set S (notebook 01's files, flat top-k) is steered onto one cell of a 2x2 grid
# whose cells are the options A-D: +β on the attention logits that the heads of S send to that cell's
# image tokens. CERS = P(c | S → c) − P(c | S → d), with c the correct cell and d a distractor, P
# renormalised over the four letters. The paper's third finding: no discovered set beats its
# layer-matched random sets (rank p ≥ .14), and random sets from any layer span the discovered
# sets' scores. Here the same test on the model in use, beside the paper's numbers where the text has them.

# %% tags=["parameters"]
model = "toy"
device = "cpu"
dtype = "float32"
eval_corpus = "co"
n_items = 100
n_random = 20
beta = 10.0
betas = [1, 3, 10, 100, 1000, 10000]
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
from helpers.controls import any_layer_sets, layer_matched_controls, with_controls
from helpers.design import SETTINGS
from helpers.engine import load_model
from helpers.figures import save_figure, save_table
from helpers.figures.causal import plot_against_random, plot_beta_sweep
from helpers.paths import REFERENCE
from helpers.stats import against_random, random_summary
from helpers.steering import cers, steering_run, symmetric_cers

P = params.validate(
    dict(
        model=model,
        device=device,
        dtype=dtype,
        eval_corpus=eval_corpus,
        n_items=n_items,
        n_random=n_random,
        beta=beta,
        betas=betas,
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
layer_matched = layer_matched_controls(discovered, P.n_random, P.seed)  # name -> [R, L, H]
any_layer = any_layer_sets((n_layers, n_heads), K, P.n_random, (P.seed, len(SETTINGS)))  # one pool for all settings
cache = ResultCache(P.cache_dir)


def steer(sets, strength):
    """Cached steering run of `sets` [n, L, H] on the evaluation grids at strength `strength`."""
    return steering_run(
        lm, P.eval_corpus, P.n_items, P.seed, sets, strength, P.rows, cache, sets_per_forward=P.batch_size
    )


print(
    f"{n_layers} x {n_heads} heads, top-{K} head-sets, {P.n_items} grids of corpus {P.eval_corpus!r}, "
    f"β = {P.beta:g} at rows {P.rows!r}, {P.n_random} layer-matched + {P.n_random} any-layer random sets"
)

# %% [markdown]
# ## Table 3 (CERS half): every setting against its layer-matched and any-layer random sets
# S's mean CERS with a 95% t-interval over items; the random sets' mean with a t-interval over the
# draws; p is the rank p of S among the individual layer-matched sets (floor 1/(R+1)).

# %%
runs = {s: steer(with_controls(S, layer_matched[s]), P.beta) for s, S in discovered.items()}
any_run = steer(any_layer, P.beta)
any_row = random_summary(cers(any_run))
table3 = pd.DataFrame(
    [
        {
            "setting": s,
            **against_random(cers(run)[:, 0], cers(run)[:, 1:]),
            "symmetric S": symmetric_cers(run)[:, 0].mean(),
            "symmetric random mean": symmetric_cers(run)[:, 1:].mean(),
        }
        for s, run in runs.items()
    ]
)
table3["any-layer mean"], table3["any-layer low"], table3["any-layer high"] = (
    any_row["random mean"],
    any_row["random low"],
    any_row["random high"],
)
clean = next(iter(runs.values()))
print(
    f"clean grid accuracy {np.mean(clean['p_clean'].argmax(1) == clean['correct']):.3f}, "
    f"mean clean P(c) {np.take_along_axis(clean['p_clean'], clean['correct'][:, None], 1).mean():.3f}"
)
paper3 = pd.read_csv(REFERENCE / "table03_cers.csv")
shown = table3.merge(
    paper3[["setting", "paper_S", "paper_random_mean", "paper_p", "paper_any_layer_mean"]], on="setting", how="left"
)
display(shown.round(3))
save_table(shown, "table03_cers", P.out_dir)
print("settings whose S beats every layer-matched set:", list(table3.setting[table3.p <= 1 / (P.n_random + 1)]))

# %% [markdown]
# ## Figure 3 (CERS panel): discovered sets against their random bands

# %%
any_table = pd.DataFrame(
    {"random mean": [any_row["random mean"]] * len(table3), "random sd": [any_row["random sd"]] * len(table3)}
)
fig = plot_against_random(table3, f"CERS (β = {P.beta:g})", any_layer=any_table)
display(fig)
save_figure(fig, "fig03_cers", P.out_dir)

# %% [markdown]
# ## Table 18: CERS against the steering strength β
# Four settings (referring + query span and ordinal + last token, both corpora); S and the mean
# [min, max] of its first 5 layer-matched random sets. β is an additive logit bias: small values
# nudge, large ones make the steered cell take nearly all of the steered heads' attention.

# %%
sweep_settings = ["cm-ref-qsp", "co-ref-qsp", "cm-ord-last", "co-ord-last"]
n_sweep = min(5, P.n_random)
sweep = []
for s in sweep_settings:
    sets = with_controls(discovered[s], layer_matched[s][:n_sweep])
    for b in P.betas:
        values = cers(steer(sets, b)).mean(0)  # [1 + n_sweep]
        sweep.append(
            {
                "setting": s,
                "beta": b,
                "S": values[0],
                "random mean": values[1:].mean(),
                "random min": values[1:].min(),
                "random max": values[1:].max(),
            }
        )
sweep = pd.DataFrame(sweep)
paper18 = pd.read_csv(REFERENCE / "table18_cers_vs_beta.csv")
shown18 = sweep.merge(paper18, on=["setting", "beta"], how="left")
display(shown18.round(3))
save_table(shown18, "table18_cers_vs_beta", P.out_dir)
fig = plot_beta_sweep(sweep)
display(fig)
save_figure(fig, "fig18_cers_vs_beta", P.out_dir)
