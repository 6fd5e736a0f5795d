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
# # 00 · Design: the discovery settings, the model, the stimuli
#
# A *visual-head discovery score* ranks attention heads by how much attention they send to an image
# region that a question asks about. Three choices inside that score are varied here, as in the paper:
#
# * the **corpus** the score is computed on (comics-like `cm` or photo-like `co` strips),
# * the **query** type (`ord`: "what is in panel 3?", `ref`: the panel named by its content),
# * the **attention source**: which token positions' attention is read (`last` prompt token, the
#   query-span tokens `qsp`, or the model's own answer tokens `out`, teacher-forced).
#
# This notebook lays out the 12 settings, describes the model in use and its head-set size `k`,
# and shows example stimuli. Later notebooks write their outputs to `out_dir` (default `paper_figures/`).

# %% tags=["parameters"]
model = "toy"
device = "cpu"
dtype = "float32"
k = 0.087
seed = 0
smoke = False
out_dir = "../paper_figures"
cache_dir = "../.cache/results"

# %%

import pandas as pd
from IPython.display import Image, display

from helpers import params
from helpers.design import OUTPUTS, k_for
from helpers.engine import load_model
from helpers.figures import save_figure, save_table
from helpers.figures.design import design_table, plot_design_grid
from helpers.figures.stimuli import plot_example_stimuli

P = params.validate(
    dict(model=model, device=device, dtype=dtype, k=k, seed=seed, smoke=smoke, out_dir=out_dir, cache_dir=cache_dir)
)

# %% [markdown]
# ## The 2 x 3 x 2 design

# %%
table = design_table()
save_table(table, "design_settings", P.out_dir)
display(table)
fig = plot_design_grid()
display(fig)
save_figure(fig, "design_grid", P.out_dir)

# %% [markdown]
# ## The model in use
# Candidate heads are the query heads of the text backbone's softmax-attention layers; `k` is a share
# of them (the paper's 100 of 1,152 by default) or an absolute count.

# %%
lm = load_model(P.model, device=P.device, dtype=P.dtype)
A = lm.adapter
n_heads = len(A.candidate_layers) * A.n_heads
K = k_for(n_heads, P.k)
model_table = pd.DataFrame(
    [
        {
            "model": P.model,
            "family": A.family,
            "layers": A.n_layers,
            "candidate layers": len(A.candidate_layers),
            "query heads / layer": A.n_heads,
            "kv heads / layer": A.n_kv_heads,
            "head dim": A.head_dim,
            "candidate heads": n_heads,
            "k": K,
            "k / heads": K / n_heads,
            "paper": "Qwen3-VL-8B: 36 x 32 = 1,152 heads, k = 100",
        }
    ]
)
save_table(model_table, "design_model", P.out_dir)
display(model_table.T)

# %% [markdown]
# ## Example stimuli
# Strips for discovery (the asked-about panel boxed), the 2x2 grid of the steering test (CERS), the
# matched / mismatched single images of the necessity test (NCS) and the text-solvable arm.

# %%
png, _ = plot_example_stimuli(P.out_dir, seed=P.seed)
display(Image(str(png)))

# %% [markdown]
# ## Where the later notebooks write
# Every figure is saved as PNG + PDF and every table as CSV + LaTeX into `out_dir`.

# %%
display(
    pd.DataFrame(
        [
            {"notebook": nb, "output": name, "kind": kind}
            for nb, outputs in OUTPUTS.items()
            for name, kind in outputs.items()
        ]
    )
)
