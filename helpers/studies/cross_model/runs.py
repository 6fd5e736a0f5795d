"""What 06_cross_model runs per model: the baseline audit, the native head-sets, their NCS / CERS against
layer-matched random sets, and the native sets' overlaps.

Every model is analysed on its own: heads are discovered anew (flat top-k, k scaled to the model's head
count) and each set is compared with random sets of the same per-layer counts drawn in the same model.
The expensive runs are the cached ones of notebooks 01, 03 and 04 (discover_all, steering_run,
necessity_run), so a rerun recomputes nothing.
"""

import json

import numpy as np
import pandas as pd

from helpers.engine.loading import LoadedModel
from helpers.measures import streams
from helpers.measures.baselines import audit
from helpers.measures.controls import layer_matched_sets, with_controls
from helpers.measures.discovery import all_setting_scores, discover_all
from helpers.measures.necessity import drop, ncs
from helpers.measures.overlap import (
    factor_medians,
    half_split_overlaps,
    overlap,
    overlap_matrix,
    random_overlaps,
    split_halves,
    top_k,
)
from helpers.measures.stats import against_random, paired_t
from helpers.measures.steering import cers
from helpers.measures.verdicts import AUDIT_RANGES
from helpers.stimuli.design import k_for
from helpers.storage import paths
from helpers.storage.cache import ResultCache
from helpers.studies.evaluation import Evaluation

# Table 22's four baselines under their names there -> the baseline's name in helpers.measures.baselines.audit and in
# helpers.measures.verdicts.AUDIT_RANGES (the one range table of the audit, shared with the protocol's report card)
AUDIT = {"oracle grid": "oracle", "blank floor": "blank", "matched": "matched", "mismatched": "mismatched"}
# Table 19 (the second-model check): the four COCO settings of the ordinal / referring x last / query-span design
TABLE19 = {
    "co-ord-last": "ordinal + last token",
    "co-ord-qsp": "ordinal + query span",
    "co-ref-last": "referring + last token",
    "co-ref-qsp": "referring + query span",
}
# Tables 8 and 24: the five query-span and output-token sets, and the last-token row
QSP_OUT = ("cm-ref-qsp", "co-ref-qsp", "co-ord-qsp", "cm-ord-qsp", "co-ref-out")
LAST = "cm-ord-last"
# Figure 7 and Table 27: the native set of each query's own source, COCO discovery
NATIVE = {"ord-last": "co-ord-last", "ref-qspan": "co-ref-qsp", "ref-out": "co-ref-out"}
CAUSAL = tuple(dict.fromkeys([*TABLE19, *QSP_OUT, LAST, *NATIVE.values()]))  # the sets of Tables 19, 8, 24
# Table 16: region-contrast NCS and symmetric CERS on the grid, the five cm settings the paper's text gives
TABLE16 = ("cm-ord-last", "cm-ord-out", "cm-ord-qsp", "cm-ref-last", "cm-ref-out")
SETTINGS_06 = tuple(dict.fromkeys([*CAUSAL, *TABLE16]))  # every set 06 discovers


def card_targets(model: str) -> tuple[int, int] | None:
    """(targets met, targets) of an embedded toy's held-out accuracies (its model card's eight targets);
    None for a model that is not an embedded toy or has no heldout_accuracy.json."""
    folder = paths.toy_folder(model)
    if folder is None:
        return None
    source = folder / "heldout_accuracy.json"
    if not source.exists():
        return None
    results = json.loads(source.read_text())["results"]
    return sum(r["passes"] for r in results.values()), len(results)


def audit_run(lm: LoadedModel, corpus: str, n_items: int, seed: int, cache: ResultCache) -> dict[str, np.ndarray]:
    """Per item, P(correct) of every AUDIT baseline without intervention: {name: [N]}
    (helpers.measures.baselines.audit)."""
    values = audit(lm, corpus, n_items, seed, cache)
    return {name: values[source] for name, source in AUDIT.items()}


def audit_row(values: dict[str, np.ndarray], card: tuple[int, int] | None) -> dict:
    """One row of Table 22: each baseline's mean, the baselines outside their range, and `passes` (all in
    range and, for an embedded toy, every target of its card met)."""
    row = {name: float(v.mean()) for name, v in values.items()}
    bounds = {name: AUDIT_RANGES[source] for name, source in AUDIT.items()}  # name -> (low, high)
    out_of_range = [name for name, (low, high) in bounds.items() if not low <= row[name] <= high]
    row["card targets"] = "-" if card is None else f"{card[0]}/{card[1]}"
    row["flagged"] = ", ".join(out_of_range + ([] if card is None or card[0] == card[1] else ["card targets"]))
    row["passes"] = not row["flagged"]
    return row


def native_sets(lm: LoadedModel, n_strips: int, k: float, seed: int, cache: ResultCache, strips_per_forward: int):
    """(mean discovery scores {setting: [L, H]} of SETTINGS_06, flat top-k sets {setting: [L, H]}, k)."""
    n_heads = len(lm.adapter.candidate_layers) * lm.adapter.n_heads
    k_top = k_for(n_heads, k)
    scores = all_setting_scores(discover_all(lm, n_strips, seed, cache, strips_per_forward))
    means = {s: scores[s].mean(0) for s in SETTINGS_06}  # [L, H] each
    return means, {s: top_k(v, k_top) for s, v in means.items()}, k_top


def controls_of(head_sets: dict, n: int, seed: int) -> dict[str, np.ndarray]:
    """{setting: [n, L, H]}: the layer-matched random sets of each native set, from 06's own streams (apart from
    notebooks 03-05's controls of the shipped toy's sets). A layer holding more of a set's heads than it has
    other heads lends its excess to the nearest layers (layer_quota's spill; spill_notes says where)."""
    template = "cross-model/layer-matched/{setting}"
    return {
        s: layer_matched_sets(h, n, streams.stream(seed, template, setting=s), spill=True)
        for s, h in head_sets.items()
    }


def sweeps(evaluation: Evaluation, scores: np.ndarray, k: int, ks: list, betas: list) -> dict:
    """{"NCS vs k": {k: mean NCS}, "CERS vs beta": {beta: mean CERS}} of one setting on this model, S only (the
    curves' shape, for the resolution table's monotone columns): the top-k of `scores` [L, H] for each of `ks`
    (heads or shares, as 05's Table 14) hidden from the image in one cached run, and its top-`k` set steered at
    each of `betas` (as 03's Table 18)."""
    n_heads = scores.size
    sizes_k = sorted({k_for(n_heads, share) for share in ks})
    by_k = ncs(evaluation.mask(np.stack([top_k(scores, n) for n in sizes_k]))).mean(0)  # [n_k]
    head_set = top_k(scores, k)[None]  # [1, L, H]
    by_beta = {float(b): float(cers(evaluation.steer(head_set, beta=float(b))).mean()) for b in betas}
    return {"NCS vs k": dict(zip(sizes_k, by_k.tolist())), "CERS vs beta": by_beta}


def causal_runs(evaluation: Evaluation, head_sets: dict, n_random: int) -> dict:
    """{setting: {"ncs", "mismatched drop": [N, 1 + r], "cers": [N, 2], "grid accuracy": clean grid accuracy}}: per
    item, S then its layer-matched random sets, the image hidden (NCS and the mismatched arm's drop under it) or
    the set steered with the evaluation's beta (CERS). As in the paper, the Table 19 settings' NCS has
    r = n_random sets; every other run one draw (the first)."""
    controls = controls_of(head_sets, n_random, evaluation.seed)  # setting -> [R, L, H]
    out = {}
    for s, head_set in head_sets.items():
        r = n_random if s in TABLE19 else 1
        masked = evaluation.mask(with_controls(head_set, controls[s][:r]))
        steered = evaluation.steer(with_controls(head_set, controls[s][:1]))  # [2, L, H]: S and one draw
        accuracy = float((steered["p_clean"].argmax(1) == steered["correct"]).mean())
        out[s] = {"ncs": ncs(masked), "mismatched drop": drop(masked, "mismatched"), "cers": cers(steered)}
        out[s]["grid accuracy"] = accuracy
    return out


def ranges(runs: dict, measure: str, settings) -> dict[str, float]:
    """Table 8's ranges over `settings`: min and max of S's mean `measure` and of its first random draw's."""
    s = [runs[x][measure][:, 0].mean() for x in settings]
    r = [runs[x][measure][:, 1].mean() for x in settings]
    return {"S min": min(s), "S max": max(s), "random min": min(r), "random max": max(r)}


def overlap_rows(means: dict[str, np.ndarray], k: int, n_draws: int, seed: int) -> list[dict]:
    """Figure 7 of one model: the native sets' pairwise top-k overlaps and each one's mean overlap with
    `n_draws` uniform random draws of k heads, as shared heads and per 100 heads of the set."""
    sets = {name: top_k(means[s], k) for name, s in NATIVE.items()}
    names = list(sets)
    rows = [
        {"pair": f"{a} / {b}", "shared": overlap(sets[a], sets[b])}
        for i, a in enumerate(names)
        for b in names[i + 1 :]
    ]
    rows += [
        {"pair": f"random / {name}", "shared": random_overlaps(means[NATIVE[name]], k, n_draws, seed).mean()}
        for name in ("ord-last", "ref-qspan")
    ]
    return [{**row, "k": k, "per 100": 100 * row["shared"] / k} for row in rows]


# The query-span and last-token sets 06 masks (every one but cm-ref-last, which only Table 16 steers)
QSP_SETS = ("cm-ord-qsp", "cm-ref-qsp", "co-ord-qsp", "co-ref-qsp")
LAST_SETS = ("cm-ord-last", "co-ord-last", "co-ref-last")


def claim_tables(lm, n_strips: int, k: float, seed: int, cache, strips_per_forward: int, runs: dict) -> dict:
    """The tables the paper's claims read (helpers.studies.claims.TABLES), as far as 06's runs of one model
    give them: Table 1 from all 12 settings' discovery scores (01's runs, read from the cache) with 200
    half-splits; the query-span vs. last-token NCS contrast over QSP_SETS and LAST_SETS, pooled and per query
    type; co-ref-qsp against its
    R layer-matched sets (Table 19's run) in Table 10's columns."""
    n_heads = len(lm.adapter.candidate_layers) * lm.adapter.n_heads
    k_top = k_for(n_heads, k)
    scores = all_setting_scores(discover_all(lm, n_strips, seed, cache, strips_per_forward))  # setting -> [N, L, H]
    splits = split_halves(n_strips, 200, seed)
    ceilings = pd.Series({s: half_split_overlaps(v, v, k_top, splits).mean() for s, v in scores.items()})
    table1 = factor_medians(overlap_matrix({s: v.mean(0) for s, v in scores.items()}, k_top), ceilings, k_top)
    groups = {"": lambda s: True, " (ord)": lambda s: "-ord-" in s, " (ref)": lambda s: "-ref-" in s}
    rows = []
    for suffix, chosen in groups.items():  # pooled, then per query type
        qsp = np.mean([runs[s]["ncs"][:, 0] for s in QSP_SETS if chosen(s)], axis=0)  # [N]
        last = np.mean([runs[s]["ncs"][:, 0] for s in LAST_SETS if chosen(s)], axis=0)
        difference, p = paired_t(qsp, last)
        rows.append({"comparison": f"qsp - last{suffix}", "mean difference": difference, "p (paired t)": p})
    contrast = pd.DataFrame(rows)
    ref = against_random(runs["co-ref-qsp"]["ncs"][:, 0], runs["co-ref-qsp"]["ncs"][:, 1:])
    large = pd.DataFrame([{"setting": "co-ref-qsp", **ref}])
    return {"table01_overlap_by_factor": table1, "ncs_source_contrast": contrast, "table10_large_r": large}
