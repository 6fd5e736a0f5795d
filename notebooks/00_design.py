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
# and shows example stimuli. Every notebook writes into its run's folder: `paper_figures/` for the default
# full run, `runs/<model>-<hash>/` for any other (see the README).

# %% tags=["parameters"]
model = "toy"
device = "cpu"
dtype = "float32"
k = None  # the paper's share of the heads (100 of 1,152); or an int, or a share 0 < k < 1
seed = 0
smoke = False
out_dir = None
data_dir = None
cache_dir = None

# %%
import pandas as pd

from helpers.engine import load_model
from helpers.figures.design import design_table, plot_design_grid
from helpers.figures.stimuli import plot_example_stimuli
from helpers.runner import params, report
from helpers.runner.steps import STEPS
from helpers.stimuli.design import k_for

P = params.gather(globals(), "00_design")

# %% [markdown]
# ## The 2 x 3 x 2 design

# %%
report.table(design_table(), "design_settings", P.out_dir)
report.figure(plot_design_grid(), "design_grid", P.out_dir)

# %% [markdown]
# ## The model in use
# Candidate heads are the query heads of the text backbone's softmax-attention layers; `k` is a share
# of them (the paper's 100 of 1,152 by default) or an absolute count.

# %%
lm = load_model(P.model, device=P.device, dtype=P.dtype)
adapter = lm.adapter
n_heads = len(adapter.candidate_layers) * adapter.n_heads
k = k_for(n_heads, P.k)
model_table = pd.DataFrame(
    [
        {
            "model": P.model,
            "family": adapter.family,
            "layers": adapter.n_layers,
            "candidate layers": len(adapter.candidate_layers),
            "query heads / layer": adapter.n_heads,
            "kv heads / layer": adapter.n_kv_heads,
            "head dim": adapter.head_dim,
            "candidate heads": n_heads,
            "k": k,
            "k / heads": k / n_heads,
            "paper": "Qwen3-VL-8B: 36 x 32 = 1,152 heads, k = 100",
        }
    ]
)
report.table(model_table, "design_model", P.out_dir)

# %% [markdown]
# ## Example stimuli
# Strips for discovery (the asked-about panel boxed), the 2x2 grid of the steering test (CERS), the
# matched / mismatched single images of the necessity test (NCS) and the text-solvable arm.

# %%
report.figure(plot_example_stimuli(seed=P.seed), "example_stimuli", P.out_dir)

# %% [markdown]
# ## What each notebook reads and writes
# Figures go out as PNG + PDF and tables as CSV + LaTeX into the run's `out_dir`; head-sets and score
# tables, the files one notebook passes to another, into its `data_dir`. Notebook 05's claims table
# also reads the result tables of 02-04 from `out_dir`.

# %%
pd.DataFrame(
    [
        {
            "notebook": name,
            "writes": ", ".join(step.writes),
            "reads (data)": ", ".join(sorted({f.split("/")[0] for f in step.data_reads})) or "-",
            "writes (data)": ", ".join(sorted({f.split("/")[0] for f in step.data_writes})) or "-",
            "reads (results)": ", ".join(f.removesuffix(".csv") for f in step.out_reads) or "-",
        }
        for name, step in STEPS.items()
    ]
)

# %% [markdown]
# ## Table 28: the protocol per result
# Each result's head-set, evaluation data, N (items, or discovery strips) and R (random head-sets per
# discovered set; in parentheses the R of the referring + query-span rows, or of k = 100), read from the
# notebooks' size parameters and helpers/sizes.py under both profiles, beside the paper's Table 28.
# The rows after the paper's six are analyses it does not list there.

# %%
from helpers.runner.protocol_tables import conversion_table, protocol_table

report.table(protocol_table(), "table28_protocol", P.out_dir, "table28_protocol", on="result", float_format="%.4g")

# %% [markdown]
# ## Table 29: the benchmark conversion recipes
# The converters' registry (helpers/stimuli/pointing_convert.py): each benchmark's pointing task, its
# recipe and what the four cells show, beside the paper's source content and recipe. A benchmark joins the
# pointing suite of notebook 06 through its `benchmarks` parameter.

# %%
report.table(conversion_table(), "table29_conversion", P.out_dir, "table29_conversion", on="benchmark")
