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
# the paper's 12 discovery settings (notebook 01's cache), how well each score ranks heads like the ablation, and
# whether each method's top-k set passes the paper's tests: NCS and CERS against layer-matched and any-layer random
# sets (notebooks 03 and 04), with the one verdict rule of the tables (helpers.studies.verdicts.versus_random).

# %% tags=["parameters"]
model = "toy"
profile = "default"
device = "cpu"
dtype = "float32"
n_strips = 400  # the 12 settings' discovery runs (notebook 01's, read from the cache)
n_items = 40  # strips per method, interleaved over corpus x query (helpers.measures.methods.cached.method_items)
k = None  # the paper's share of the heads (100 of 1,152); or an int, or a share 0 < k < 1
key_agg = "raw"
row_agg = "mean"
strips_per_forward = 16
eval_corpus = "co"  # the methods' sets tested as notebooks 03 / 04 test the settings' sets
n_eval = 20  # evaluation items of the NCS and CERS runs (MCQ pairs, grids)
# R: layer-matched random sets per method, and the any-layer sets all methods share. 179 is the least R at which
# Holm across the 9 methods can reach p <= .05 (verdicts.holm_random_sets(9); tests/test_methods.py keeps it so):
# at R = 20 the smallest Holm-adjusted rank p is 9 / 21 = .429 and no method could pass. Cost on the toy's CPU: about
# 2 minutes of masking and steering per method at n_eval = 20 (20 CPU-minutes in all, against 2.5 at R = 20)
n_random = 179
n_splits = 200  # half-splits of each method's strips and each setting's strips (notebook 02's noise ceiling)
beta = 10.0  # CERS steering strength (notebook 03's)
rows = "all"
sets_per_forward = 64
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

from helpers import sizes
from helpers.engine import load_model
from helpers.measures.controls import any_layer_sets, layer_matched_sets, spill_note, spill_notes, with_controls
from helpers.measures.discovery import all_setting_scores, discover_all
from helpers.measures.methods import CAUSAL_REFERENCES, FACTS, METHODS, PER_ITEM, rank_agreement
from helpers.measures.methods.cached import method_run
from helpers.measures.methods.ceiling import shared_across_halves, split_scores
from helpers.measures.necessity import ncs
from helpers.measures.overlap import overlap, split_halves, top_k
from helpers.measures.stats import against_random, holm, t_interval
from helpers.measures.steering import cers
from helpers.runner import params, report
from helpers.stimuli.design import k_for
from helpers.storage.cache import ResultCache
from helpers.studies import findings
from helpers.studies.evaluation import Evaluation
from helpers.studies.verdicts import damage_verdict, holm_random_sets, judge

P = params.gather(globals(), "08_methods")
lm = load_model(P.model, device=P.device, dtype=P.dtype)
cache = ResultCache(P.cache_dir)
evaluation = Evaluation(lm, P.eval_corpus, P.n_eval, P.seed, cache, P.sets_per_forward, P.beta, P.rows)
shape = (len(lm.adapter.candidate_layers), lm.adapter.n_heads)
n_heads = shape[0] * shape[1]
k_top = k_for(n_heads, P.k)
print(f"{n_heads} heads, top-{k_top}; {P.n_items} strips per method, interleaved over corpus x query")

# %% [markdown]
# ## What each method reads, and how its authors selected and validated heads

# %%
facts = pd.DataFrame([{"method": name, **vars(f)} for name, f in FACTS.items()])
facts = report.table(facts, "methods_facts", P.out_dir)

# %% [markdown]
# ## Every method's score on the same strips
# Per-item scores come from the result cache (computation "methods", keyed by the method, its parameters and the
# strips), so `seconds` is the time of this run: the computation, or reading it back. A method that cannot serve
# the model or the strips is refused with its reason (FACTS' `needs`) and left out of the tables below.

# %%
runs, scores, seconds, refused = {}, {}, {}, {}
for name in METHODS:
    start = time.perf_counter()
    try:
        runs[name] = method_run(lm, name, P.n_items, P.seed, cache)
        scores[name] = PER_ITEM[name][1](runs[name])
    except ValueError as error:
        refused[name] = str(error)
        print(f"{name} refused: {error}")
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
# The last row, `half-split ceiling`, is each column's noise ceiling: the heads its top-k on one half of its items
# shares with its top-k on the other half, mean over `n_splits` random half-splits (notebook 02's ceiling). A method's
# halves are halves of its `n_items` strips, scored by the method's own combine (a mean, or SparseMM's mean over
# answered items, ...; a split where a half gives no score is left out: `ceiling splits` counts those kept); a
# setting's are halves of its `n_strips` discovery strips. The matrix's overlaps are of full-data sets on the same
# items, so they are not compared with the ceilings (half the data, disjoint halves); the sentence below compares
# each method's ceiling with its overlap across the same halves (its top-k on one half, another column's on the
# other half, mean over the splits): an overlap there that reaches the ceiling is as close as two halves of the
# method's own data agree.

# %%
item_scores = all_setting_scores(
    discover_all(lm, P.n_strips, P.seed, cache, P.strips_per_forward), P.key_agg, P.row_agg
)  # setting -> [N, L, H]
setting_scores = {s: v.mean(0) for s, v in item_scores.items()}
sets = {name: top_k(score, k_top) for name, score in scores.items()}
columns = {**sets, **{s: top_k(v, k_top) for s, v in setting_scores.items()}}
method_splits = split_halves(P.n_items, P.n_splits, P.seed)
setting_splits = split_halves(P.n_strips, P.n_splits, P.seed)
halves = {name: split_scores(runs[name], PER_ITEM[name][1], method_splits) for name in sets}
halves |= {s: [(v[a].mean(0), v[b].mean(0)) for a, b in setting_splits] for s, v in item_scores.items()}
ceiling_runs = {name: shared_across_halves(h, h, k_top) for name, h in halves.items()}
ceilings = pd.DataFrame(
    {
        "column": list(ceiling_runs),
        "items per half": [P.n_items // 2 if c in sets else P.n_strips // 2 for c in ceiling_runs],
        "ceiling splits": [int(np.isfinite(v).sum()) for v in ceiling_runs.values()],
        "half-split ceiling": [np.nanmean(v) if np.isfinite(v).any() else np.nan for v in ceiling_runs.values()],
    }
)
ceilings = report.table(ceilings, "methods_ceilings", P.out_dir, on="column")
matrix = pd.DataFrame({b: {a: overlap(sets[a], columns[b]) for a in sets} for b in columns}).astype(float)
matrix.loc["half-split ceiling"] = ceilings.set_index("column")["half-split ceiling"]
fig, ax = plt.subplots(figsize=(0.45 * len(columns) + 2, 0.45 * len(matrix) + 1.5))
annot = matrix.map(lambda v: f"{v:.0f}")
annot.loc["half-split ceiling"] = matrix.loc["half-split ceiling"].map(lambda v: f"{v:.1f}")
sns.heatmap(matrix / k_top, annot=annot, fmt="", cmap="viridis", vmin=0, vmax=1, ax=ax, annot_kws={"fontsize": 7})
ax.axhline(len(sets), color="white", linewidth=2)  # the ceilings' row below the methods' rows
ax.set_title(
    f"Top-{k_top} overlap: methods (rows) vs methods and the 12 settings, and each column's half-split ceiling "
    "(colour: share of k)"
)
report.figure(fig, "methods_overlap", P.out_dir)
matrix = report.table(matrix.reset_index(names="method"), "methods_overlap", P.out_dir, float_format="%.1f")
across_halves = pd.DataFrame(
    {b: {a: np.nanmean(shared_across_halves(halves[a], halves[b], k_top)) for a in sets} for b in columns}
)  # methods (rows) x columns: top-k on one half against the column's top-k on the other half
print(findings.methods_ceiling_sentence(across_halves, ceilings.set_index("column")["half-split ceiling"], k_top))

# %% [markdown]
# ## Which scores rank heads like exact single-head ablation?
# Spearman's rank correlation over heads between each score and the mean drop in P(correct) when the head's
# output is zeroed; attribution patching is the first-order estimate of that drop.

# %%
ablation = scores.get("ablation", np.full(shape, np.nan))
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
            f"top-{k_top} overlap with ablation": overlap(columns[name], top_k(ablation, k_top))
            if "ablation" in sets
            else np.nan,
            "seconds": seconds.get(name, np.nan),
        }
        for name, score in {**scores, **{s: setting_scores[s] for s in setting_scores}}.items()
        if name != "ablation"
    ]
)
agreement = report.table(agreement, "methods_ablation_agreement", P.out_dir, on="score")

# %% [markdown]
# ## Do the methods' sets pass the paper's tests? NCS and CERS against random sets
# Each method's top-k set S (the k of the settings' sets) on the evaluation data of notebooks 03 and 04 (`n_eval`
# items of `eval_corpus`): NCS (the image hidden from S on the single-image MCQ, matched minus mismatched drop) and
# CERS (S steered to the answer's cell minus to a distractor's, beta = `beta`), each against R layer-matched random
# sets of the method (stream "methods/layer-matched/<method>"; where a layer holds more of S than of the rest, they
# borrow from the nearest layers, printed and in the `layer-matched spill` column) and against R any-layer random
# sets of k heads that every method shares (stream "methods/any-layer"). S with a 95% t-interval over items; p =
# rank p among the random sets; Holm across the methods per measure and control; z; the effect (per item, S minus
# the random sets' mean) with its t-interval; the verdict by the tables' one rule (verdicts.versus_random on the
# Holm p and S - random mean). No Holm-adjusted p can fall below methods / (R + 1): the sentence under the table
# gives that floor for this run and the least R at which Holm across the tested methods can reach .05
# (verdicts.holm_random_sets), the default `n_random`.

# %%
R = sizes.n_random(P, "methods")
R_any = sizes.n_random(P, "methods_any_layer")


def against(discovered: np.ndarray, random: np.ndarray) -> dict:
    """against_random of S's per-item values [N] and the random sets' [N, R], with the effect's t-interval."""
    effect, low, high = t_interval(discovered - random.mean(1))
    return {**against_random(discovered, random), "effect": effect, "effect low": low, "effect high": high}


# measure -> (per-item score [N, n], the cached run of sets [n, L, H] it reads: notebook 04's masking, 03's steering)
MEASURES = {"NCS": (ncs, evaluation.mask), "CERS": (cers, evaluation.steer)}
any_sets = any_layer_sets(shape, k_top, R_any, sizes.stream(P.seed, "methods/any-layer"))
any_values = {measure: score(run(any_sets)) for measure, (score, run) in MEASURES.items()}  # [N, R_any]
reference = top_k(setting_scores["co-ref-qsp"], k_top)
stats = []
for name, head_set in sets.items():
    stream = sizes.stream(P.seed, "methods/layer-matched/{method}", method=name)
    controls = layer_matched_sets(head_set, R, stream, spill=True)
    for measure, (score, run) in MEASURES.items():
        per_item = score(run(with_controls(head_set, controls)))  # [N, 1 + R]
        randoms = {"layer-matched": per_item[:, 1:], "any-layer": any_values[measure]}
        for control, random in randoms.items():
            stats.append({"method": name, "measure": measure, "control": control, **against(per_item[:, 0], random)})
stats = pd.DataFrame(stats)
spill = spill_notes(sets)
if spill:
    print(f"layer-matched sets borrow from the nearest layers (a layer holds more of S than of the rest): {spill}")
stats["p Holm"] = stats.groupby(["measure", "control"])["p"].transform(lambda p: holm(p.to_numpy()))
n_tests = stats.groupby(["measure", "control"])["p"].transform("size")
stats["verdict"] = [judge(row, "p Holm", int(n)).outcome for row, n in zip(stats.to_dict("records"), n_tests)]
stats = report.table(stats, "methods_validation_stats", P.out_dir, on=["method", "measure", "control"])
print(findings.holm_reach_sentence(stats, {"layer-matched": R, "any-layer": R_any}, holm_random_sets(len(sets))))

# %% [markdown]
# ## Generic damage: is each method's set more necessary than sets that damage the model without being "visual"?
# Notebook 05's Table 12 for each method's set S (Evaluation.generic_damage, the report card's): the k heads with the
# most attention to the first token (attention sinks) or to the prompt text (masses at the question and option rows
# of the `n_eval` matched single-image items), the whole layer(s) holding the fewest of S's heads, and 2k / 4k
# random heads of any layer; each masked as S is for NCS, and with the text hidden on the text-solvable arm. The
# verdict is the card's (verdicts.damage_verdict): pass when S's NCS lower bound (95% t-interval) exceeds every
# generic-damage set's NCS by at least the minimum effect.

# %%
damage, damage_rows = [], {}
for name, head_set in sets.items():
    table = evaluation.generic_damage(head_set)
    s_low = stats[(stats.method == name) & (stats.measure == "NCS")]["S low"].iloc[0]
    verdict = damage_verdict(name, s_low, table, audits=[])
    others = table[table["damage set"] != "discovered"]
    worst = others.loc[others["NCS"].idxmax()]
    damage_rows[name] = {
        "damage NCS max": worst["NCS"],
        "damage set of max": worst["damage set"],
        "damage verdict": verdict.verdict,
    }
    damage.append(table.assign(method=name))
damage = pd.concat(damage, ignore_index=True)
damage = damage[["method", *damage.columns.drop("method")]]
damage = report.table(damage, "methods_generic_damage", P.out_dir, on=["method", "damage set"])

# %% [markdown]
# ## The methods table
# One row per method: overlap with co-ref-qsp, NCS and CERS against layer-matched and any-layer random sets (Holm
# across the methods), the half-split ceiling of its strips, and its generic damage (the largest generic-damage NCS
# and the card's verdict), beside each other; a refused method keeps its reason.

# %%
ceiling_of = ceilings.set_index("column")["half-split ceiling"]
validation = []
for name, head_set in sets.items():
    row = {
        "method": name,
        "kind": "causal reference" if name in CAUSAL_REFERENCES else "method",
        "overlap with co-ref-qsp per 100": 100 * overlap(head_set, reference) / k_top,
        "half-split ceiling": ceiling_of[name],
    }
    for measure in MEASURES:
        row[f"{measure} S"] = stats[(stats.method == name) & (stats.measure == measure)]["S"].iloc[0]
        for control, prefix in (("layer-matched", measure), ("any-layer", f"{measure} any-layer")):
            hit = stats[(stats.method == name) & (stats.measure == measure) & (stats.control == control)].iloc[0]
            row[f"{prefix} random"], row[f"{prefix} p"] = hit["random mean"], hit["p"]
            row[f"{prefix} p Holm"], row[f"{prefix} verdict"] = hit["p Holm"], hit["verdict"]
    row["layer-matched spill"] = spill_note(head_set)
    validation.append({**row, **damage_rows[name]})
for name, reason in refused.items():
    validation.append({"method": name, "kind": "refused", "refused": reason})
validation = pd.DataFrame(validation)
validation.insert(2, "k", k_top)
validation.insert(3, "R", R)
validation.insert(4, "R any-layer", R_any)
validation = report.table(validation, "methods_validation", P.out_dir, on="method")
print(findings.methods_validation_sentence(validation))
print(findings.methods_damage_sentence(validation))
