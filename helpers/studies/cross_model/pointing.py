"""The pointing suite's cached runs on a model: the leak audit_task, CERS (steering) and NCS (masking) per task.

The same per-item computations as notebooks 03 and 04 (steer_items, mask_items) on a task's items, cached
per chunk of items under the task's name (and a converted task's file digest).
"""

import numpy as np

from helpers.engine.loading import LoadedModel
from helpers.engine.model_files import model_identity
from helpers.measures import streams
from helpers.measures.controls import layer_matched_sets, with_controls
from helpers.measures.necessity import mask_items, ncs
from helpers.measures.pointing_audit import audit_items, audit_summary
from helpers.measures.set_chunks import head_sets_key
from helpers.measures.steering import cers, distractor_cells, steer_items
from helpers.stimuli.pointing import Task, task_items
from helpers.storage.cache import ResultCache, computation_key


def _key(lm: LoadedModel, task: Task, seed: int, **params) -> dict:
    """computation_key of a run on `task`'s items (the task's name and a converted task's file digest)."""
    return computation_key(
        **model_identity(lm),
        corpus={"task": task.name, "source": task.source},
        params={"seed": seed, **params},
        code_module=__name__,
    )


def task_audit_run(lm: LoadedModel, task: Task, n_items: int, seed: int, cache: ResultCache) -> dict[str, np.ndarray]:
    """audit_items of the task's first n_items, through the cache in chunks of 10."""

    def compute(start, stop):
        return audit_items(lm.model, lm.processor, task, seed, start, stop)

    return cache.cached_chunks("pointing_audit", _key(lm, task, seed), n_items, 10, compute)


def task_steering_run(
    lm, task: Task, n_items: int, seed: int, head_sets: np.ndarray, beta: float, cache, sets_per_forward: int = 64
):
    """steer_items on the task's plain grids for head-sets [n, L, H] (keys as
    helpers.measures.steering.steering_run)."""
    key = _key(lm, task, seed, head_sets=head_sets_key(head_sets), beta=float(beta))

    def compute(start, stop):
        items = task_items(task, stop, seed, start=start)
        return steer_items(lm, items, distractor_cells(items, seed), head_sets, beta, "all", sets_per_forward)

    return cache.cached_chunks("pointing_steering", key, n_items, 10, compute)


def task_necessity_run(
    lm, task: Task, n_items: int, seed: int, head_sets: np.ndarray, cache, sets_per_forward: int = 64
):
    """mask_items on the task's matched and mismatched arms (keys as helpers.measures.necessity.necessity_run, so
    helpers.measures.necessity.ncs applies)."""
    key = _key(lm, task, seed, head_sets=head_sets_key(head_sets))

    def compute(start, stop):
        out = {}
        for arm in ("matched", "mismatched"):
            items = task_items(task, stop, seed, arm, start)
            out.update({f"{arm}_{k}": v for k, v in mask_items(lm, items, head_sets, "all", sets_per_forward).items()})
        return out

    return cache.cached_chunks("pointing_necessity", key, n_items, 10, compute)


def score_suite(
    lm, tasks: dict[str, Task], head_sets: dict, *, n_items: int, seed: int, beta: float, cache, sets_per_forward: int
):
    """The suite on one model: the leak audit of every task, then CERS and NCS of each of `head_sets`
    ({name: [L, H]}) and one layer-matched draw of it (spilling as 06's controls_of), on the tasks that pass
    the audit (a flagged task is not scored). Returns ({task: audit row + "plain accuracy"},
    {task: {"cers", "ncs": {name: [N, 2]}}})."""
    template = "pointing/layer-matched/{setting}"
    draws = {
        n: layer_matched_sets(s, 1, streams.stream(seed, template, setting=n), spill=True)
        for n, s in head_sets.items()
    }
    stack = np.concatenate([with_controls(s, draws[name]) for name, s in head_sets.items()])  # [2 m, L, H]
    audits, scores = {}, {}
    for task_name, task in tasks.items():
        clean = task_audit_run(lm, task, n_items, seed, cache)
        audits[task_name] = audit_summary(clean)
        if not audits[task_name]["passes"]:
            continue
        per_item = {
            "cers": cers(task_steering_run(lm, task, n_items, seed, stack, beta, cache, sets_per_forward)),  # [N, 2 m]
            "ncs": ncs(task_necessity_run(lm, task, n_items, seed, stack, cache, sets_per_forward)),
        }
        scores[task_name] = {
            measure: {name: values[:, 2 * i : 2 * i + 2] for i, name in enumerate(head_sets)}
            for measure, values in per_item.items()
        }
    return audits, scores
