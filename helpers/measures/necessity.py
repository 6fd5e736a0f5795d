"""Necessity (NCS) on single-image MCQs: hide the whole image from a head-set and watch P(correct).

Item i comes in two arms with the same four options and the same correct letter: matched (the image
shows the correct option's class) and mismatched (it shows a class outside the options, so the image
cannot help and P(correct) sits near chance). For every head-set S the image tokens are hidden from
the heads of S (bias HIDE on the image keys, at the query rows of a row group), and

    drop(arm) = P_clean(c) - P_masked(c)        (P renormalised over the four letters)
    NCS       = drop(matched) - drop(mismatched)   per item pair; its mean over items is the NCS
    NCS-v2    = drop(matched)

The mismatched arm carries the damage that masking does to any prompt, so it cancels. The text arm
(the prompt states the answer) is the control of the other direction: hiding the prompt text
(keys="text") from a head-set measures how much the set carries text (Table 12). Per-item, per-set
probabilities are cached on disk in chunks of items, each set's also in parts of its own (helpers.measures.set_chunks).
"""

import numpy as np
import torch

from helpers.engine.attention import HIDE
from helpers.engine.head_sets import remember_items
from helpers.engine.inputs import item_batch
from helpers.engine.mcq import letter_probs_under
from helpers.engine.model_files import model_identity
from helpers.engine.row_groups import takes_row_group
from helpers.measures.set_chunks import chunk_of_sets, clean_probs, clean_run, head_sets_key
from helpers.stimuli.corpora import Item, corpus_key, items_of
from helpers.storage.cache import ResultCache, computation_key

ARMS = ("matched", "mismatched")  # the two arms of NCS
ALL_ARMS = ("matched", "mismatched", "text")
KEY_GROUPS = ("image", "text")
ARM_KINDS = {"matched": "single_matched", "mismatched": "single_mismatched", "text": "text"}  # corpora.KINDS


def hidden_keys(batch, keys: str) -> torch.Tensor:
    """Bool [B, T]: the keys hidden from the head-sets, the "image" tokens or the prompt "text"."""
    if keys == "image":
        return batch.image_mask
    if keys == "text":
        return batch.prompt_text_mask
    raise ValueError(f"keys {keys!r} is not one of {KEY_GROUPS}")


@takes_row_group
@torch.no_grad()
def mask_items(
    lm,
    items: list[Item],
    head_sets: np.ndarray,
    row_group: str = "all",
    sets_per_forward: int = 64,
    keys: str = "image",
    clean: bool = True,
    masking: str = "hide",
) -> dict[str, np.ndarray]:
    """Letter probabilities of every item with `keys` (hidden_keys) hidden from each head-set [n, L, H], by
    `masking` (helpers.engine.masking.MASKINGS: the paper's "hide", or one of the field's implementations).

    Returns p_masked [N, n, 4], correct [N] and with `clean` p_clean [N, 4] (necessity_run takes it
    from the cached clean run instead)."""
    sets = torch.as_tensor(head_sets, dtype=torch.bool)
    p_masked = []
    for item in items:
        batch = item_batch(lm.processor, item)
        probs = letter_probs_under(
            lm, batch, sets, hidden_keys(batch, keys), HIDE, row_group, sets_per_forward, masking=masking
        )  # [n, 4]
        p_masked.append(probs)
    out = {"p_masked": torch.stack(p_masked).numpy(), "correct": np.array([item.correct for item in items])}
    return {**out, "p_clean": clean_probs(lm, items)} if clean else out


@takes_row_group
def necessity_run(
    lm,
    corpus: str,
    n_items: int,
    seed: int,
    head_sets: np.ndarray,
    row_group: str,
    cache: ResultCache,
    chunk: int = 10,
    sets_per_forward: int = 64,
    arms: tuple[str, ...] = ARMS,
    keys: str = "image",
    masking: str = "hide",
) -> dict[str, np.ndarray]:
    """mask_items on `arms` (default: both NCS arms) of `n_items` single-image MCQs of `corpus`, the
    `keys` hidden by `masking`, cached per chunk of items; the clean probabilities from clean_run.

    Keys: "<arm>_p_masked" [N, n, 4], "<arm>_p_clean" [N, 4] and "<arm>_correct" [N] for each arm."""
    bad = [arm for arm in arms if arm not in ALL_ARMS]
    if bad or not arms:
        raise ValueError(f"arms {list(arms)} must be a non-empty selection of {ALL_ARMS}")
    key = computation_key(
        **model_identity(lm),
        corpus=corpus_key(corpus),
        params={
            "seed": seed,
            "head_sets": head_sets_key(head_sets),
            "row_group": row_group,
            "arms": list(arms),
            "keys": keys,
            "masking": masking,
        },
        code_module=__name__,
    )

    def compute_sets(sets, start, stop):
        out = {}
        for arm in arms:
            items = items_of(ARM_KINDS[arm], corpus, n_items, seed)[start:stop]
            masked = mask_items(lm, items, sets, row_group, sets_per_forward, keys, clean=False, masking=masking)
            out.update({f"{arm}_{key}": value for key, value in masked.items()})
        return out

    def compute(start, stop):  # each set's part read back where another stack or run computed it (set_chunks)
        return chunk_of_sets(cache, "necessity", key, head_sets, start, stop, chunk, compute_sets)

    def prepare(start, stop):
        for arm in arms:
            remember_items(lm, items_of(ARM_KINDS[arm], corpus, n_items, seed)[start:stop])

    run = cache.cached_chunks("necessity", key, n_items, chunk, compute, prepare)
    for arm in arms:
        run[f"{arm}_p_clean"] = clean_run(lm, ARM_KINDS[arm], corpus, n_items, seed, cache, chunk)
    return run


def drop(run: dict[str, np.ndarray], arm: str) -> np.ndarray:
    """[N, n] P_clean(c) - P_masked(c) of every item of `arm` under every head-set."""
    if arm not in ALL_ARMS:
        raise ValueError(f"arm {arm!r} is not one of {ALL_ARMS}")
    correct = run[f"{arm}_correct"]
    clean = np.take_along_axis(run[f"{arm}_p_clean"], correct[:, None], axis=1)  # [N, 1]
    masked = np.take_along_axis(run[f"{arm}_p_masked"], correct[:, None, None], axis=2)[..., 0]  # [N, n]
    return clean - masked


def ncs(run: dict[str, np.ndarray]) -> np.ndarray:
    """[N, n] per item pair: drop(matched) - drop(mismatched); the mean over items is the NCS."""
    if not np.array_equal(run["matched_correct"], run["mismatched_correct"]):
        raise ValueError("the matched and mismatched arms are not paired: their correct letters differ")
    return drop(run, "matched") - drop(run, "mismatched")


def single_heads(n_layers: int, n_heads: int) -> np.ndarray:
    """[L * H, L, H]: one head-set per head, in (layer, head) order."""
    return np.eye(n_layers * n_heads, dtype=bool).reshape(n_layers * n_heads, n_layers, n_heads)


def single_head_profile(lm, corpus: str, n_items: int, seed: int, cache: ResultCache) -> dict[str, np.ndarray]:
    """Redundancy measured directly: the image hidden from one head at a time (all rows, both NCS arms).
    Returns "ncs" and "matched drop", each [L, H] means over the `n_items` item pairs."""
    n_layers, n_heads = len(lm.adapter.candidate_layers), lm.adapter.n_heads
    run = necessity_run(lm, corpus, n_items, seed, single_heads(n_layers, n_heads), "all", cache)
    shape = (n_layers, n_heads)
    return {"ncs": ncs(run).mean(0).reshape(shape), "matched drop": drop(run, "matched").mean(0).reshape(shape)}
