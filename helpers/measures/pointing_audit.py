"""The pointing suite's leak audit on a model: P(correct) per item on the plain grid and on every leak-audit
stimulus of a task (helpers.stimuli.pointing.EXPECTED), without intervention."""

import numpy as np

from helpers.engine.mcq import letter_probs, prob_correct
from helpers.stimuli.pointing import EXPECTED, Task, audit_task, task_items


def audit_items(model, processor, task: Task, seed: int, start: int, stop: int) -> dict[str, np.ndarray]:
    """Items start..stop-1 of `task`, without intervention: P(correct) on the plain grid and every leak-audit
    stimulus ({variant: [n]}) and whether the plain grid's most probable letter is the correct one ("plain hit")."""
    out = {}
    for variant in ("plain", *EXPECTED):
        items = task_items(task, stop, seed, variant, start)
        probs = letter_probs(model, processor, items)  # [n, 4]
        out[variant] = prob_correct(probs, items).numpy()
        if variant == "plain":
            out["plain hit"] = probs.argmax(1).numpy() == np.array([item.correct for item in items])
    return out


def audit_summary(clean: dict[str, np.ndarray]) -> dict:
    """A task's leak-audit row (audit_task) and its plain accuracy, from audit_items' per-item values."""
    return {**audit_task(clean), "plain accuracy": float(clean["plain hit"].mean())}
