"""Steerability (CERS) on the 2x2 grid MCQ whose four cells are the options A-D.

For an item with correct cell c and a distractor cell d, do(S -> x) adds +beta to the attention
logits that the heads of S send to the image tokens of cell x (at the rows of a row group):

    CERS           = P(c | do(S -> c)) - P(c | do(S -> d))
    symmetric CERS = (CERS + P(d | do(S -> d)) - P(d | do(S -> c))) / 2

P is renormalised over the four option letters. With beta = HIDE the same two runs hide a cell from S
instead, which gives the region-contrast necessity NCS_grid = P(c | d hidden) - P(c | c hidden).

One distractor per item, drawn by seed from the three other cells. Per-item, per-set probabilities
are cached on disk in chunks of items (each set's also in parts: helpers.measures.set_chunks), so every statistic
over sets and items is computed afterwards.
"""

import numpy as np
import torch

from helpers.engine.head_sets import remember_items
from helpers.engine.inputs import item_batch
from helpers.engine.mcq import letter_probs_under
from helpers.engine.model_files import model_identity
from helpers.engine.row_groups import takes_row_group
from helpers.measures.set_chunks import chunk_of_sets, clean_probs, clean_run, head_sets_key
from helpers.stimuli.corpora import LETTERS, Item, corpus_key, items_of
from helpers.storage.cache import ResultCache, computation_key


def distractor_cells(items: list[Item], seed: int) -> np.ndarray:
    """[N] one distractor cell index per item (never the correct one), deterministic by seed and item."""
    out = []
    for item in items:
        rng = np.random.default_rng([seed, *item.seed_key, 7])
        out.append((item.correct + 1 + int(rng.integers(3))) % 4)
    return np.array(out)


def cell_keys(lm, batch, item: Item, cell: int) -> torch.Tensor:
    """Bool [1, T]: the image tokens of grid cell `cell` (0..3 = A..D) of the batch's one item."""
    return lm.adapter.region_mask(batch.inputs, item.boxes[LETTERS[cell]], item.image.size, 0)[None]


@takes_row_group
@torch.no_grad()
def steer_items(
    lm,
    items: list[Item],
    distractors: np.ndarray,
    head_sets: np.ndarray,
    beta: float,
    row_group: str = "all",
    sets_per_forward: int = 64,
    clean: bool = True,
) -> dict[str, np.ndarray]:
    """Letter probabilities of every item under do(S -> c) and do(S -> d) for every head-set.

    head_sets: bool [n, L, H]. Returns p_to_c and p_to_d [N, n, 4], correct and distractor [N], and
    with `clean` p_clean [N, 4] (steering_run takes it from the cached clean run instead)."""
    sets = torch.as_tensor(head_sets, dtype=torch.bool)
    n = sets.shape[0]
    p_to_c, p_to_d = [], []
    for item, d in zip(items, distractors):
        batch = item_batch(lm.processor, item)
        keys = torch.cat(
            [cell_keys(lm, batch, item, item.correct).expand(n, -1), cell_keys(lm, batch, item, int(d)).expand(n, -1)]
        )  # [2n, T]
        probs = letter_probs_under(lm, batch, torch.cat([sets, sets]), keys, beta, row_group, sets_per_forward)
        p_to_c.append(probs[:n])
        p_to_d.append(probs[n:])
    out = {
        "p_to_c": torch.stack(p_to_c).numpy(),
        "p_to_d": torch.stack(p_to_d).numpy(),
        "correct": np.array([i.correct for i in items]),
        "distractor": np.asarray(distractors),
    }
    return {**out, "p_clean": clean_probs(lm, items)} if clean else out


@takes_row_group
def steering_run(
    lm,
    corpus: str,
    n_items: int,
    seed: int,
    head_sets: np.ndarray,
    beta: float,
    row_group: str,
    cache: ResultCache,
    chunk: int = 10,
    sets_per_forward: int = 64,
) -> dict[str, np.ndarray]:
    """steer_items over `n_items` plain grids of `corpus`, cached per chunk of items; p_clean from clean_run."""
    key = computation_key(
        **model_identity(lm),
        corpus=corpus_key(corpus),
        params={"seed": seed, "head_sets": head_sets_key(head_sets), "beta": float(beta), "row_group": row_group},
        code_module=__name__,
    )

    def compute_sets(sets, start, stop):
        items = items_of("grid", corpus, n_items, seed)[start:stop]
        return steer_items(lm, items, distractor_cells(items, seed), sets, beta, row_group, sets_per_forward, False)

    def compute(start, stop):  # each set's part read back where another stack or run computed it (set_chunks)
        return chunk_of_sets(cache, "steering", key, head_sets, start, stop, chunk, compute_sets)

    def prepare(start, stop):
        remember_items(lm, items_of("grid", corpus, n_items, seed)[start:stop])

    run = cache.cached_chunks("steering", key, n_items, chunk, compute, prepare)
    return {**run, "p_clean": clean_run(lm, "grid", corpus, n_items, seed, cache, chunk)}


def _at(probs: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """probs [N, n, 4], cells [N] -> [N, n]: each item's probability of its own cell's letter."""
    return np.take_along_axis(probs, cells[:, None, None], axis=2)[..., 0]


def cers(run: dict[str, np.ndarray]) -> np.ndarray:
    """[N, n] per-item CERS of every head-set: P(c | S -> c) - P(c | S -> d)."""
    return _at(run["p_to_c"], run["correct"]) - _at(run["p_to_d"], run["correct"])


def symmetric_cers(run: dict[str, np.ndarray]) -> np.ndarray:
    """[N, n] per-item symmetric CERS: the mean of the c-contrast and the d-contrast."""
    d_contrast = _at(run["p_to_d"], run["distractor"]) - _at(run["p_to_c"], run["distractor"])
    return (cers(run) + d_contrast) / 2


def ncs_grid(run: dict[str, np.ndarray]) -> np.ndarray:
    """[N, n] region-contrast necessity from a run with beta = HIDE: P(c | d hidden) - P(c | c hidden)."""
    return _at(run["p_to_d"], run["correct"]) - _at(run["p_to_c"], run["correct"])
