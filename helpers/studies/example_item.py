"""One item walked through the causal tests (the paper's Figure 1, step 2, and Figure 8).

The cached runs of notebooks 03 and 04 (`steering_run`, `necessity_run`) on the first evaluation item of each kind,
for a discovered set S and its first layer-matched random set: each set's results on that item are read from the
cached parts of the runs that held it (helpers.measures.set_chunks), or computed once for them (a handful of forwards).

- `grid_contrast`: the Figure 1 bars: P(c) with a distractor's cell hidden from the set, and with the
  answer's cell hidden (NCS_grid of that item is their difference);
- `causal_example`: Figure 8: P(A..D) of one grid clean, under do(S -> c) and do(S -> d); P(correct) of
  one matched and one mismatched single image, clean and with the image hidden from S.
"""

import numpy as np

from helpers.engine import HIDE
from helpers.measures.necessity import necessity_run
from helpers.measures.steering import steering_run
from helpers.stimuli.corpora import items_of
from helpers.storage.cache import ResultCache


def grid_contrast(lm, corpus: str, seed: int, head_sets: np.ndarray, cache: ResultCache) -> dict:
    """The first grid of `corpus`: P(c) clean and, per set [n, L, H], with d's cell or c's cell hidden."""
    (item,) = items_of("grid", corpus, 1, seed)
    run = steering_run(lm, corpus, 1, seed, head_sets, HIDE, "all", cache)
    c = item.correct
    return {
        "item": item,
        "distractor": int(run["distractor"][0]),
        "p clean": float(run["p_clean"][0, c]),
        "p d hidden": run["p_to_d"][0, :, c],  # [n]
        "p c hidden": run["p_to_c"][0, :, c],  # [n]
    }


def causal_example(lm, corpus: str, seed: int, head_set: np.ndarray, beta: float, cache: ResultCache) -> dict:
    """Figure 8's numbers for one set [L, H]: the first grid steered to c and to d (P(A..D) [4] each,
    and clean), and the first matched and mismatched single images, clean and masked (P(correct))."""
    sets = np.asarray(head_set, dtype=bool)[None]  # [1, L, H]
    (grid,) = items_of("grid", corpus, 1, seed)
    steered = steering_run(lm, corpus, 1, seed, sets, beta, "all", cache)
    masked = necessity_run(lm, corpus, 1, seed, sets, "all", cache)
    singles = {}
    for arm in ("matched", "mismatched"):
        (item,) = items_of(f"single_{arm}", corpus, 1, seed)
        correct = item.correct
        singles[arm] = {
            "item": item,
            "p clean": float(masked[f"{arm}_p_clean"][0, correct]),
            "p masked": float(masked[f"{arm}_p_masked"][0, 0, correct]),
        }
    return {
        "grid": grid,
        "distractor": int(steered["distractor"][0]),
        "p clean": steered["p_clean"][0],  # [4]
        "p to c": steered["p_to_c"][0, 0],  # [4]
        "p to d": steered["p_to_d"][0, 0],  # [4]
        "single": singles,
    }
