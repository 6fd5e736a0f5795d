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
import sys

sys.path.insert(0, "..")
from IPython.display import display

from helpers import params
from helpers.design_figures import design_table, plot_design_grid
from helpers.figures import save_figure, save_table

P = params.validate(dict(model=model, device=device, dtype=dtype, k=k, seed=seed, smoke=smoke,
                         out_dir=out_dir, cache_dir=cache_dir))

# %% [markdown]
# ## The 2 x 3 x 2 design

# %%
table = design_table()
save_table(table, "design_settings", P.out_dir)
display(table)
fig = plot_design_grid()
display(fig)
save_figure(fig, "design_grid", P.out_dir)
