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
# # 07 · Protocol: a report card for any model and head-set
#
# The paper closes with a protocol for reporting a visual-head discovery. This notebook applies it to
# the head-sets in `heads` (head-set files, score files imported with `import_k`, or discovery setting
# names read from the run's data folder) on the model in use: provenance and the discovery data's
# noise ceiling, the baseline audit of the evaluation data (Table 22), necessity (NCS, NCS_grid) and
# steerability (CERS, a β sweep) against layer-matched and any-layer random sets, generic damage, the
# rows where necessity acts, and a verdict per check. A check that rests on an audit out of range is
# "not interpretable", never scored. `profile` picks the sizes: "default" (03-05's draws at N = 50, their
# cached chunks read back) or "paper" (N = 400, R = 100); `sizes` overrides any of them.
# `controls` (a scheme of helpers/measures/control_schemes.py, e.g. "bottom5") adds a line: NCS against
# the random sets that scheme of the field draws, its verdict beside the layer-matched one.
# `method` (gaze, ver, ..., attribution: notebook 08's methods) adds the top-k set that method discovers on this
# model, saved with its provenance in the run folder's headsets/.
# `python -m helpers.protocol --model ... --heads ...` runs this notebook and leaves report.md and
# report.html beside its executed copy.

# %% tags=["parameters"]
model = "toy"
device = "cpu"
dtype = "float32"
heads = ["co-ref-qsp"]
# a published method (helpers/measures/methods): its top-k set is discovered on the card's model and carded too
method = None
import_k = None
heads_from_other_model = False  # True: card head-set files discovered on another model (the card says so at its top)
controls = None
profile = "default"
sizes = {}
eval_corpus = "co"
beta = 10.0
sets_per_forward = 64
seed = 0
interactive = False
smoke = False
out_dir = None
data_dir = None
cache_dir = None

# %%
from helpers import protocol
from helpers.figures.explorer import plot_random_histograms
from helpers.runner import params, report
from helpers.storage import paths

P = params.gather(globals(), "07_protocol")
card_protocol = protocol.Protocol(P)
print(
    f"{P.model}: {card_protocol.n_layers} x {card_protocol.n_heads} heads; head-sets "
    f"{[h.name for h in card_protocol.head_sets]}; profile {P.profile!r}: {card_protocol.sizes}"
)
card = protocol.build_card(card_protocol)

# %% [markdown]
# ## Verdicts and conclusion
# One row per check: pass / fail / not interpretable / not run, the number it rests on and the reason
# (thresholds in `helpers/measures/verdicts.py`). The conclusion is generated from these rows.

# %%
report.table(card["verdicts"], "protocol_verdicts", P.out_dir)
print("\n".join(card["conclusion"]))

# %% [markdown]
# ## Provenance and the baseline audit

# %%
report.table(card["provenance"], "protocol_provenance", P.out_dir)
report.table(card["audit"], "protocol_audit", P.out_dir)

# %% [markdown]
# ## Necessity and steerability against random head-sets
# Rank p of S among R random sets (floor 1 / (R + 1)), Holm-adjusted across the head-sets; z in the
# random sets' SD; effect = the per-item excess of S over its random sets' mean, with a t-interval.

# %%
report.table(card["necessity"], "protocol_necessity", P.out_dir)
report.table(card["steerability"], "protocol_steerability", P.out_dir)
report.table(card["sweep"], "protocol_sweep", P.out_dir)
for name, values in card["random_means"].items():
    fig = plot_random_histograms(values["S"], values["random"], f"{name}: S against its random sets")
    report.figure(fig, f"protocol_random_sets_{card['meta']['head-sets'].index(name)}", P.out_dir)

# %% [markdown]
# ## Generic damage and where necessity acts

# %%
report.table(card["damage"], "protocol_damage", P.out_dir)
report.table(card["row_groups"], "protocol_rows", P.out_dir)

# %% [markdown]
# ## The report files
# report.md and report.html beside the executed notebook (the run's `notebooks/` folder), and card.json
# with every number.

# %%
first = next(iter(card["random_means"].values()))
fig = plot_random_histograms(first["S"], first["random"], f"{card['meta']['head-sets'][0]}: S against its random sets")
written = protocol.write_report(card, P.out_dir / "notebooks", fig, "protocol_random_sets_0")
print("wrote", *map(paths.shown, written))

# %% [markdown]
# ## Explorer (`interactive=True`)
# Score maps, overlaps, one item's head attention and the set's random-set histograms, over the cached runs.

# %%
if P.interactive:
    from helpers.studies.explorer import show_explorer

    show_explorer(model=P.model, device=P.device, dtype=P.dtype, cache_dir=P.cache_dir)

# %% [markdown]
# ## The artefact index
# INDEX.md in the run folder: every figure and table of the paper, the files of this folder that
# regenerate it and its status (helpers/runner/artefacts.py); a listed file the folder lacks is named in
# its row. The runner writes it again once every notebook of the run is done.

# %%
from helpers.runner import artefacts

tally = artefacts.write_index(P.out_dir)
