"""The evaluation runs of one model: the cached steering and masking runs every causal notebook makes.

One object holds what those runs share (the loaded model, the evaluation corpus and its item count, the
seed, the result cache, copies per forward, the notebook's beta and rows), so notebooks 03-05
(`Experiment`), the report card (`Protocol`), 06 (one per model) and 08 make the same calls and read each
other's cached runs.

    evaluation = Evaluation(lm, "co", 100, 0, ResultCache(cache_dir), sets_per_forward=64, beta=10.0)
    values = ncs(evaluation.mask(sets))          # [N, n] for head-sets [n, L, H]
"""

import numpy as np

from helpers.engine import HIDE
from helpers.measures.necessity import ARMS, necessity_run
from helpers.measures.steering import steering_run
from helpers.storage.cache import ResultCache


class Evaluation:
    def __init__(
        self,
        lm,
        corpus: str,
        n_items: int,
        seed: int,
        cache: ResultCache,
        sets_per_forward: int = 64,
        beta: float | None = None,
        rows: str = "all",
    ):
        self.lm, self.corpus, self.n_items, self.seed, self.cache = lm, corpus, n_items, seed, cache
        self.sets_per_forward, self.beta, self.rows = sets_per_forward, beta, rows

    def steer(self, sets: np.ndarray, beta: float | None = None, rows: str | None = None) -> dict[str, np.ndarray]:
        """Cached steering run of `sets` [n, L, H] on the evaluation grids (default: this evaluation's beta, rows)."""
        beta = self.beta if beta is None else beta
        if beta is None:
            raise ValueError("steer needs a beta: this evaluation has none, pass one")
        return steering_run(
            self.lm,
            self.corpus,
            self.n_items,
            self.seed,
            sets,
            beta,
            rows or self.rows,
            self.cache,
            sets_per_forward=self.sets_per_forward,
        )

    def hide_cells(self, sets: np.ndarray, rows: str | None = None) -> dict[str, np.ndarray]:
        """Cached grid run with one cell hidden from each set (NCS_grid): the steering run at bias HIDE."""
        return self.steer(sets, beta=HIDE, rows=rows)

    def mask(
        self,
        sets: np.ndarray,
        rows: str | None = None,
        arms: tuple[str, ...] = ARMS,
        keys: str = "image",
        masking: str = "hide",
    ) -> dict[str, np.ndarray]:
        """Cached necessity run of `sets` [n, L, H]: `keys` hidden from each set at `rows` on the `arms` MCQs by
        `masking` (the paper's "hide" by default)."""
        return necessity_run(
            self.lm,
            self.corpus,
            self.n_items,
            self.seed,
            sets,
            rows or self.rows,
            self.cache,
            sets_per_forward=self.sets_per_forward,
            arms=arms,
            keys=keys,
            masking=masking,
        )
