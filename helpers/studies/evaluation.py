"""The evaluation runs of one model: the cached steering and masking runs every causal notebook makes, and the
generic-damage table (notebook 05's Table 12) of a head-set built from them.

One object holds what those runs share (the loaded model, the evaluation corpus and its item count, the
seed, the result cache, copies per forward, the notebook's beta and row group), so notebooks 03-05
(`Experiment`), the report card (`Protocol`), 06 (one per model) and 08 make the same calls and read each
other's cached runs.

    evaluation = Evaluation(lm, "co", 100, 0, ResultCache(cache_dir), sets_per_forward=64, beta=10.0)
    values = ncs(evaluation.mask(sets))          # [N, n] for head-sets [n, L, H]
    damage = evaluation.generic_damage(mask)     # Table 12's rows for one head-set [L, H]
"""

import numpy as np
import pandas as pd

from helpers.engine import HIDE
from helpers.engine.row_groups import takes_row_group
from helpers.measures.controls import damage_table, generic_damage_sets
from helpers.measures.head_mass import mass_run
from helpers.measures.necessity import ARMS, necessity_run
from helpers.measures.steering import steering_run
from helpers.storage.cache import ResultCache


class Evaluation:
    @takes_row_group
    def __init__(
        self,
        lm,
        corpus: str,
        n_items: int,
        seed: int,
        cache: ResultCache,
        sets_per_forward: int = 64,
        beta: float | None = None,
        row_group: str = "all",
    ):
        self.lm, self.corpus, self.n_items, self.seed, self.cache = lm, corpus, n_items, seed, cache
        self.sets_per_forward, self.beta, self.row_group = sets_per_forward, beta, row_group

    def with_items(self, n_items: int) -> "Evaluation":
        """The same evaluation on `n_items` items of its corpus (a table that the paper runs on another N)."""
        return Evaluation(
            self.lm, self.corpus, n_items, self.seed, self.cache, self.sets_per_forward, self.beta, self.row_group
        )

    @takes_row_group
    def steer(
        self, sets: np.ndarray, beta: float | None = None, row_group: str | None = None
    ) -> dict[str, np.ndarray]:
        """Cached steering run of `sets` [n, L, H] on the evaluation grids (default: this evaluation's beta and row
        group)."""
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
            row_group or self.row_group,
            self.cache,
            sets_per_forward=self.sets_per_forward,
        )

    @takes_row_group
    def hide_cells(self, sets: np.ndarray, row_group: str | None = None) -> dict[str, np.ndarray]:
        """Cached grid run with one cell hidden from each set (NCS_grid): the steering run at bias HIDE."""
        return self.steer(sets, beta=HIDE, row_group=row_group)

    @takes_row_group
    def mask(
        self,
        sets: np.ndarray,
        row_group: str | None = None,
        arms: tuple[str, ...] = ARMS,
        keys: str = "image",
        masking: str = "hide",
    ) -> dict[str, np.ndarray]:
        """Cached necessity run of `sets` [n, L, H]: `keys` hidden from each set at `row_group` on the `arms` MCQs by
        `masking` (the paper's "hide" by default)."""
        return necessity_run(
            self.lm,
            self.corpus,
            self.n_items,
            self.seed,
            sets,
            row_group or self.row_group,
            self.cache,
            sets_per_forward=self.sets_per_forward,
            arms=arms,
            keys=keys,
            masking=masking,
        )

    def single_mass(self) -> dict[str, np.ndarray]:
        """Key group -> [L, H]: each head's attention mass at the question and option rows of the matched
        single-image MCQs (cached; the masses Table 12's attention-sink and text-heavy sets are drawn from)."""
        return mass_run(self.lm, self.corpus, "single_matched", self.n_items, self.seed, "prompt", self.cache)

    def grid_mass(self) -> dict[str, np.ndarray]:
        """Key group -> [L, H]: each head's attention mass at the question and option rows of the evaluation grids
        (cached; the masses notebook 05 compares with CERS, which is measured on these grids)."""
        return mass_run(self.lm, self.corpus, "grid", self.n_items, self.seed, "prompt", self.cache)

    def generic_damage(self, head_set: np.ndarray) -> pd.DataFrame:
        """Table 12 for `head_set` [L, H] (helpers.measures.controls.damage_table): S and its generic-damage sets at
        k = S's size, each with the image hidden on both image arms and with the text hidden on the text arm."""
        head_set = np.asarray(head_set, dtype=bool)
        sets = generic_damage_sets(head_set, int(head_set.sum()), self.single_mass(), self.seed)
        stack = np.stack(list(sets.values()))  # [6, L, H]
        return damage_table(sets, self.mask(stack), self.mask(stack, arms=("text",), keys="text"))
