"""What the causal notebooks (03 CERS, 04 NCS, 05 controls) share, built once from their parameters.

    P = params.gather(globals(), "04_ncs")
    exp = Experiment(P)
    run = exp.mask(exp.with_controls("co-ref-qsp", 20))      # S and its first 20 layer-matched random sets
    values = ncs(run)                                         # [N, 1 + R]

Reads: the run's head-sets (``<data_dir>/headsets/<setting>.json``, written by 01_discovery).
Every run goes through the result cache, so a table that repeats another table's run reads it back;
mask_controls reads a larger R's first sets back from the smaller R's run.
"""

import numpy as np

from helpers.engine import compile_decoder_layers, load_model
from helpers.engine.row_groups import takes_row_group
from helpers.measures.controls import layer_matched_controls, spill_notes, with_controls
from helpers.stimuli.design import SETTINGS
from helpers.storage import headsets
from helpers.storage.cache import ResultCache
from helpers.studies.evaluation import Evaluation


class Experiment(Evaluation):
    """The model, the 12 discovered head-sets [L, H], their layer-matched random sets [R, L, H], and the
    cached runs (`Evaluation`: steer, hide_cells, mask) at the notebook's corpus, items, beta and row group."""

    def __init__(self, params):
        self.params = params
        lm = load_model(params.model, device=params.device, dtype=params.dtype)
        if params.torch_compile:
            compile_decoder_layers(lm)
        beta = getattr(params, "beta", None)  # 03 and 04 steer at their beta; 05 passes one where it steers
        super().__init__(
            lm, params.eval_corpus, params.n_items, params.seed, ResultCache(params.cache_dir),
            params.sets_per_forward, beta, params.row_group,
        )  # fmt: skip
        self.n_layers, self.n_heads = len(lm.adapter.candidate_layers), lm.adapter.n_heads
        self.discovered = self.head_sets()  # setting -> [L, H]
        self.k = int(next(iter(self.discovered.values())).sum())

    def head_sets(self, suffix: str = "") -> dict[str, np.ndarray]:
        """The run's discovered head-sets (suffix "": flat top-k, "_per_layer": top-k per layer)."""
        return headsets.load_settings(
            self.params.data_dir / "headsets", SETTINGS, self.params.model, self.n_layers, self.n_heads, suffix
        )

    def controls(self, setting: str, n: int) -> np.ndarray:
        """[n, L, H]: the first n layer-matched random sets of setting's S (the same in every notebook)."""
        return layer_matched_controls(self.discovered[setting], setting, n, self.params.seed)

    def with_controls(self, setting: str, n: int) -> np.ndarray:
        """[1 + n, L, H]: setting's S, then its first n layer-matched random sets."""
        return with_controls(self.discovered[setting], self.controls(setting, n))

    @takes_row_group
    def mask_controls(self, setting: str, n: int, row_group: str | None = None) -> dict[str, np.ndarray]:
        """mask(with_controls(setting, n)), run in two parts when n > the notebook's n_random: S with its first
        n_random sets (Table 3's and Table 5's run, read back from the cache) and the sets after them. The parts
        equal the one run to float32 rounding (a forward of other copies rounds a copy's matmuls differently)."""
        first = self.params.n_random
        if n <= first:
            return self.mask(self.with_controls(setting, n), row_group)
        head = self.mask(self.with_controls(setting, first), row_group)
        tail = self.mask(self.controls(setting, n)[first:], row_group)
        return {
            key: np.concatenate([value, tail[key]], axis=1) if key.endswith("_p_masked") else value
            for key, value in head.items()
        }

    def describe(self) -> str:
        """The model, sets, items and row group; and the settings whose layer-matched controls spill (layer_quota)."""
        p, spill = self.params, spill_notes(self.discovered)
        return (
            f"{p.model}: {self.n_layers} x {self.n_heads} heads, top-{self.k} head-sets, {p.n_items} items of "
            f"corpus {p.eval_corpus!r}, profile {p.profile!r}, row group {p.row_group!r}"
            + (f"\nlayer-matched controls borrow from the nearest layers (a layer holds more of S than of the rest): "
               f"{spill}" if spill else "")
        )  # fmt: skip
