"""One item walked through the causal tests (the paper's Figure 1, step 2, and Figure 8).

The same per-item functions as notebooks 03 and 04 (`steer_items`, `mask_items`) on the first evaluation
item of each kind, for a discovered set S and its first layer-matched random set: a handful of forwards,
so the figures need no cache.

- `grid_contrast`: the Figure 1 bars: P(c) with a distractor's cell hidden from the set, and with the
  answer's cell hidden (NCS_grid of that item is their difference);
- `causal_example`: Figure 8: P(A..D) of one grid clean, under do(S -> c) and do(S -> d); P(correct) of
  one matched and one mismatched single image, clean and with the image hidden from S.
"""

import numpy as np

from helpers.engine import HIDE
from helpers.measures.necessity import mask_items
from helpers.measures.steering import distractor_cells, steer_items
from helpers.stimuli.prepared import items_of


def grid_contrast(lm, corpus: str, seed: int, head_sets: np.ndarray) -> dict:
    """The first grid of `corpus`: P(c) clean and, per set [n, L, H], with d's cell or c's cell hidden."""
    (item,) = items_of("grid", corpus, 1, seed)
    distractor = distractor_cells([item], seed)
    run = steer_items(lm, [item], distractor, head_sets, HIDE)
    c = item.correct
    return {
        "item": item,
        "distractor": int(distractor[0]),
        "p clean": float(run["p_clean"][0, c]),
        "p d hidden": run["p_to_d"][0, :, c],  # [n]
        "p c hidden": run["p_to_c"][0, :, c],  # [n]
    }


def causal_example(lm, corpus: str, seed: int, head_set: np.ndarray, beta: float) -> dict:
    """Figure 8's numbers for one set [L, H]: the first grid steered to c and to d (P(A..D) [4] each,
    and clean), and the first matched and mismatched single images, clean and masked (P(correct))."""
    sets = np.asarray(head_set, dtype=bool)[None]  # [1, L, H]
    (grid,) = items_of("grid", corpus, 1, seed)
    distractor = distractor_cells([grid], seed)
    steered = steer_items(lm, [grid], distractor, sets, beta)
    singles = {}
    for arm in ("matched", "mismatched"):
        (item,) = items_of(f"single_{arm}", corpus, 1, seed)
        masked = mask_items(lm, [item], sets)
        correct = item.correct
        singles[arm] = {
            "item": item,
            "p clean": float(masked["p_clean"][0, correct]),
            "p masked": float(masked["p_masked"][0, 0, correct]),
        }
    return {
        "grid": grid,
        "distractor": int(distractor[0]),
        "p clean": steered["p_clean"][0],  # [4]
        "p to c": steered["p_to_c"][0, 0],  # [4]
        "p to d": steered["p_to_d"][0, 0],  # [4]
        "single": singles,
    }
