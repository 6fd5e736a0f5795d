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
# sets (notebooks 03 and 04), with the one verdict rule of the tables (helpers.measures.verdicts.versus_random).

# %% tags=["parameters"]
model = "toy"
profile = "default"
device = "cpu"
dtype = "float32"
torch_compile = True  # the NCS and CERS runs in compiled decoder layers, as notebooks 03-05 run theirs
n_strips = 400  # the 12 settings' discovery runs (notebook 01's, read from the cache)
n_items = 40  # strips per method, interleaved over corpus x query (helpers.measures.methods.cached.method_items)
k = None  # the paper's share of the heads (100 of 1,152); or an int, or a share 0 < k < 1
key_agg = "raw"
row_agg = "mean"
strips_per_forward = 16
eval_corpus = "co"  # the methods' sets tested as notebooks 03 / 04 test the settings' sets
n_eval = 20  # evaluation items of the NCS and CERS runs (MCQ pairs, grids)
# R: layer-matched random sets per method, and the any-layer sets all methods share. 179 is the least R at which
# Holm across all 9 rows could reach p <= .05 (verdicts.holm_random_sets(9); tests/test_methods.py keeps it so); Holm
# runs within the 7 published methods and, apart, the 2 causal references (methods.holm_family), so the methods'
# floor is 7 / 180 = .039, below .05 rather than at it: at R = 20 it is 7 / 21 = .333 and no method could pass. Cost
# on the toy's CPU: about 2 minutes of masking and steering per method at n_eval = 20 (20 CPU-minutes in all, against
# 2.5 at R = 20)
n_random = 179
n_splits = 200  # half-splits of each method's strips and each setting's strips (notebook 02's noise ceiling)
beta = 10.0  # CERS steering strength (notebook 03's)
row_group = "all"
sets_per_forward = 64
seed = 0
smoke = False
out_dir = None
data_dir = None
cache_dir = None

# %%
from helpers import sizes
from helpers.engine import compile_decoder_layers, load_model
from helpers.figures.methods import plot_method_overlap, plot_method_score_maps
from helpers.measures.controls import spill_notes
from helpers.measures.discovery import all_setting_scores, discover_all
from helpers.measures.methods import holm_family
from helpers.measures.overlap import top_k
from helpers.measures.verdicts import holm_random_sets
from helpers.runner import params, report
from helpers.stimuli.design import k_for
from helpers.storage.cache import ResultCache
from helpers.studies import findings
from helpers.studies.evaluation import Evaluation
from helpers.studies.methods import comparison
from helpers.studies.methods.validation import damage_tables, validation_stats, validation_table

P = params.gather(globals(), "08_methods")
lm = load_model(P.model, device=P.device, dtype=P.dtype)
cache = ResultCache(P.cache_dir)
evaluation = Evaluation(lm, P.eval_corpus, P.n_eval, P.seed, cache, P.sets_per_forward, P.beta, P.row_group)
n_heads = len(lm.adapter.candidate_layers) * lm.adapter.n_heads
k_top = k_for(n_heads, P.k)
print(f"{n_heads} heads, top-{k_top}; {P.n_items} strips per method, interleaved over corpus x query")

# %% [markdown]
# ## What each method reads, and how its authors selected and validated heads

# %%
facts = report.table(comparison.facts_table(), "methods_facts", P.out_dir)

# %% [markdown]
# ## Every method's score on the same strips
# Per-item scores come from the result cache (computation "methods", keyed by the method, its parameters and the
# strips), so `seconds` is the time of this run: the computation, or reading it back. A method that cannot serve
# the model or the strips is refused with its reason (FACTS' `needs`) and left out of the tables below.

# %%
runs, scores, seconds, refused = comparison.method_scores(lm, P.n_items, P.seed, cache)
for name, reason in refused.items():
    print(f"{name} refused: {reason}")
report.figure(plot_method_score_maps(scores), "methods_score_maps", P.out_dir)

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
halves = comparison.half_scores(runs, item_scores, P.n_items, P.n_strips, P.n_splits, P.seed)
ceilings = comparison.ceilings_table(halves, list(sets), P.n_items, P.n_strips, k_top)
ceilings = report.table(ceilings, "methods_ceilings", P.out_dir, on="column")
matrix = comparison.overlap_table(sets, columns, ceilings)
report.figure(plot_method_overlap(matrix, k_top), "methods_overlap", P.out_dir)
matrix = report.table(matrix.reset_index(names="method"), "methods_overlap", P.out_dir, float_format="%.1f")
across_halves = comparison.across_halves_table(halves, list(sets), list(columns), k_top)
ceiling_of = ceilings.set_index("column")[comparison.CEILING]
print(findings.methods_ceiling_sentence(across_halves, ceiling_of, k_top))

# %% [markdown]
# ## Which scores rank heads like exact single-head ablation?
# Spearman's rank correlation over heads between each score and the mean drop in P(correct) when the head's
# output is zeroed; attribution patching is the first-order estimate of that drop.

# %%
agreement = comparison.ablation_agreement_table(scores, setting_scores, columns, k_top, seconds)
agreement = report.table(agreement, "methods_ablation_agreement", P.out_dir, on="score")

# %% [markdown]
# ## Do the methods' sets pass the paper's tests? NCS and CERS against random sets
# Each method's top-k set S (the k of the settings' sets) on the evaluation data of notebooks 03 and 04 (`n_eval`
# items of `eval_corpus`): NCS (the image hidden from S on the single-image MCQ, matched minus mismatched drop) and
# CERS (S steered to the answer's cell minus to a distractor's, beta = `beta`), each against R layer-matched random
# sets of the method (stream "methods/layer-matched/<method>"; where a layer holds more of S than of the rest, they
# borrow from the nearest layers, printed and in the `layer-matched spill` column) and against R any-layer random
# sets of k heads that every method shares (stream "methods/any-layer"). S with a 95% t-interval over items; p =
# rank p among the random sets; Holm per measure and control within the published methods and, apart, within the
# causal references (helpers.measures.methods.holm_family: the references are the yardstick, not claims under
# test, so they do not widen the methods' family); z; the effect (per item, S minus
# the random sets' mean) with its t-interval; the verdict by the tables' one rule (verdicts.versus_random on the
# Holm p and S - random mean). No Holm-adjusted p can fall below methods / (R + 1): the sentence under the table
# gives that floor for this run and the least R at which Holm across the tested methods can reach .05
# (verdicts.holm_random_sets), the default `n_random`.

# %%
if P.torch_compile:  # from here on the engine only masks and steers (the scores above ran eager)
    compile_decoder_layers(lm)
R, R_any = sizes.n_random(P, "methods"), sizes.n_random(P, "methods_any_layer")
stats = validation_stats(evaluation, sets, k_top, R, R_any, P.seed)
spill = spill_notes(sets)
if spill:
    print(f"layer-matched sets borrow from the nearest layers (a layer holds more of S than of the rest): {spill}")
stats = report.table(stats, "methods_validation_stats", P.out_dir, on=["method", "measure", "control"])
published = [name for name in sets if holm_family(name) == "published methods"]
print(findings.holm_reach_sentence(stats, {"layer-matched": R, "any-layer": R_any}, holm_random_sets(len(published))))

# %% [markdown]
# ## Generic damage: is each method's set more necessary than sets that damage the model without being "visual"?
# Notebook 05's Table 12 for each method's set S (Evaluation.generic_damage, the report card's): the k heads with the
# most attention to the first token (attention sinks) or to the prompt text (masses at the question and option rows
# of the `n_eval` matched single-image items), the whole layer(s) holding the fewest of S's heads, and 2k / 4k
# random heads of any layer; each masked as S is for NCS, and with the text hidden on the text-solvable arm. The
# verdict is the card's (verdicts.damage_verdict): pass when S's NCS lower bound (95% t-interval) exceeds every
# generic-damage set's NCS by at least the minimum effect.

# %%
damage, damage_rows = damage_tables(evaluation, sets, stats)
damage = report.table(damage, "methods_generic_damage", P.out_dir, on=["method", "damage set"])

# %% [markdown]
# ## The methods table
# One row per method: overlap with co-ref-qsp, NCS and CERS against layer-matched and any-layer random sets (Holm
# within the published methods, and apart within the causal references), the half-split ceiling of its strips, and
# its generic damage (the largest generic-damage NCS and the card's verdict), beside each other; a refused method
# keeps its reason.

# %%
reference = top_k(setting_scores["co-ref-qsp"], k_top)
validation = validation_table(sets, k_top, reference, ceiling_of, stats, damage_rows, refused, R, R_any)
validation = report.table(validation, "methods_validation", P.out_dir, on="method")
print(findings.methods_validation_sentence(validation))
print(findings.methods_damage_sentence(validation))
