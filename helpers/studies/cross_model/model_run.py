"""Everything notebook 06 runs on one model (`model_run`): the baseline audit, the native head-sets discovered anew,
their NCS and CERS against layer-matched random sets, the sweeps, the single-head profile and the depth probe, the
region contrast (Table 16, where the grid passes the audit) and the pointing suite. Every run goes through the result
cache; the model is loaded for the call and released after it.
"""

from helpers import sizes
from helpers.engine import load_model
from helpers.measures.controls import spill_notes
from helpers.storage.cache import ResultCache
from helpers.studies.cross_model.pointing import score_suite
from helpers.studies.cross_model.resolution import single_head_run
from helpers.studies.cross_model.runs import (
    CAUSAL,
    NATIVE,
    TABLE16,
    audit_row,
    audit_run,
    card_targets,
    causal_runs,
    claim_tables,
    controls_of,
    native_sets,
    sweeps,
)
from helpers.studies.evaluation import Evaluation
from helpers.studies.region_contrast import (
    attainable_ncs_grid,
    grid_audit,
    region_contrast_runs,
    region_contrast_table,
)
from helpers.toy.probe import depth_profile

# The pointing suite's head-sets: the native sets, and cm-ref-qsp and co-ord-qsp for Table 23 (suite name -> setting)
SUITE_SETS = {**NATIVE, "cm-ref-qsp": "cm-ref-qsp", "co-ord-qsp": "co-ord-qsp"}


def model_run(name: str, params, cache: ResultCache, tasks: dict) -> dict:
    """One model's results under 06's `params` (its sizes, seed, device): {"audit row": Table 22's row, "audit":
    "passes" or "FAILS", "flagged", "means": {setting: [L, H]} discovery scores, "k", "runs": causal_runs, "spill",
    "single head", "probe", "sweeps", "claim tables", "contrasts": Table 16's runs and "region contrast": its table
    (None where the model fails its audit), "pointing": (audits, scores) of the suite on `tasks`}."""
    p = params
    lm = load_model(name, device=p.device, dtype=p.dtype)
    row = audit_row(audit_run(lm, p.eval_corpus, p.n_items, p.seed, cache), card_targets(name))
    means, sets, k = native_sets(lm, p.n_strips, p.k, p.seed, cache, p.strips_per_forward)
    single = single_head_run(lm, p.eval_corpus, sizes.single_head_items(p), p.seed, cache)
    probe = depth_profile(lm, cache, sizes.probe_items(p), p.eval_corpus, p.seed)
    compared = [*CAUSAL, *SUITE_SETS.values(), *(TABLE16 if row["passes"] else ())]
    evaluation = Evaluation(lm, p.eval_corpus, p.n_items, p.seed, cache, p.sets_per_forward, p.beta)
    runs = causal_runs(evaluation, {s: sets[s] for s in CAUSAL}, p.n_random)
    result = {
        "audit row": {"model": name, "family": lm.adapter.family, **row},
        "audit": "passes" if row["passes"] else "FAILS",
        "flagged": row["flagged"],
        "means": means,
        "k": k,
        "runs": runs,
        "spill": spill_notes({s: sets[s] for s in compared}),
        "single head": single,
        "probe": probe,
        "sweeps": sweeps(evaluation, means["co-ref-qsp"], k, p.ks, p.betas),
        "claim tables": claim_tables(lm, p.n_strips, p.k, p.seed, cache, p.strips_per_forward, runs),
        "contrasts": None,
        "region contrast": None,
    }
    if row["passes"]:  # Table 16 on the models whose grid passes the audit only
        cm_sets = {s: sets[s] for s in TABLE16}
        contrasts = region_contrast_runs(evaluation, cm_sets, controls_of(cm_sets, p.n_random_grid, p.seed))
        region = region_contrast_table(contrasts, attainable_ncs_grid(evaluation), grid_audit(evaluation))
        result |= {"contrasts": contrasts, "region contrast": region.assign(model=name)}
    suite_sets = {suite_name: sets[s] for suite_name, s in SUITE_SETS.items()}
    result["pointing"] = score_suite(
        lm,
        tasks,
        suite_sets,
        n_items=p.n_pointing,
        seed=p.seed,
        beta=p.beta,
        cache=cache,
        sets_per_forward=p.sets_per_forward,
    )
    return result
