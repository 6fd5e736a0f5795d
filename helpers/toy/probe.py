"""The depth and saturation profile of a model: can its causal effects be graded, or only be total or nil?

    .venv/bin/python -m helpers.toy.probe [MODEL] [--n-items 40] [--corpus co]

Two properties decide it (helpers/toy/README.md, "Depth and saturation: the probe"):
- depth: the image hidden from one layer's heads at every query row (the engine's HIDE on the image keys,
  row group "all"), one layer at a time and cumulatively from layer 0. A model that reads the image in one
  layer loses the task there and nowhere else; `largest layer share` is the largest single-layer NCS over
  the NCS of hiding every layer;
- saturation: the clean log-odds of the correct letter against the other three on matched items
  (ln P(c) - ln(1 - P(c)), P renormalised over the four letters), and uniform random sets of k and 2k heads
  (PROBE_RANDOM_SETS each): the mean and SD over sets of NCS and of the matched log-odds drop. At log-odds 11 a
  random set that moves the log-odds by a nat moves P(c) by 2e-5; near 5 nats, by 7e-3.

NCS per set is the mean over item pairs of drop(matched) - drop(mismatched) (helpers.measures.necessity).
Every number comes from one necessity_run (both arms, 2L + 2 x PROBE_RANDOM_SETS head-sets, through the result
cache): notebook 06 keeps it with its other runs; training checkpoints pass a throwaway cache.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from helpers.engine.loading import load_model
from helpers.measures.controls import any_layer_sets
from helpers.measures.necessity import ARMS, necessity_run
from helpers.sizes import PROBE_RANDOM_SETS
from helpers.stimuli.design import k_for
from helpers.storage.cache import ResultCache
from helpers.storage.paths import CACHE

PROBE_SEED = 4321  # the items (seed of items_of) and the random sets; training draws items from seeds >= 10_000


def layer_sets(n_layers: int, n_heads: int) -> np.ndarray:
    """[2L, L, H]: every head of layer l (rows 0..L-1), then every head of layers 0..l (rows L..2L-1)."""
    single = np.zeros((n_layers, n_layers, n_heads), dtype=bool)
    cumulative = np.zeros_like(single)
    for layer in range(n_layers):
        single[layer, layer] = True
        cumulative[layer, : layer + 1] = True
    return np.concatenate([single, cumulative])


def log_odds(p: np.ndarray) -> np.ndarray:
    """ln p - ln(1 - p), with p clipped to [1e-12, 1 - 1e-12] (float32 probabilities round to 1 near 16 nats)."""
    p = np.clip(p, 1e-12, 1 - 1e-12)
    return np.log(p) - np.log1p(-p)


def correct_p(probs: np.ndarray, correct: np.ndarray) -> np.ndarray:
    """P(correct letter) of [N, ..., 4] letter probabilities: [N, ...]."""
    index = correct.reshape(-1, *([1] * (probs.ndim - 1)))
    return np.take_along_axis(probs, index, axis=-1)[..., 0]


def spread(values: np.ndarray) -> dict:
    """Mean and SD (sample, ddof 1) over the sets of per-set values [n]."""
    return {"mean": float(values.mean()), "sd": float(values.std(ddof=1))}


def depth_profile(
    lm, cache: ResultCache, n_items: int = 40, corpus: str = "co", seed: int = PROBE_SEED, k: int | None = None
) -> dict:
    """The probe on `n_items` matched / mismatched pairs of single-image MCQs of `corpus` (see the module doc).

    Returns {"n_items", "k", "layer ncs" [L], "cumulative ncs" [L], "all layers ncs", "largest layer share",
    "clean log-odds": {"median", "p10", "p90"}, "clean p median", "random": {k or 2k: {"ncs", "p drop",
    "log-odds drop": {"mean", "sd"}}}}."""
    n_layers, n_heads = lm.adapter.n_layers, lm.adapter.n_heads
    k = k or k_for(n_layers * n_heads)
    rng = np.random.default_rng(seed)
    random = {size: any_layer_sets((n_layers, n_heads), size, PROBE_RANDOM_SETS, rng) for size in (k, 2 * k)}
    sets = np.concatenate([layer_sets(n_layers, n_heads), *random.values()])  # [2L + 2R, L, H]
    run = necessity_run(lm, corpus, n_items, seed, sets, "all", cache)
    p_clean = {arm: correct_p(run[f"{arm}_p_clean"], run[f"{arm}_correct"]) for arm in ARMS}  # [N]
    p_masked = {arm: correct_p(run[f"{arm}_p_masked"], run[f"{arm}_correct"]) for arm in ARMS}  # [N, n]
    drops = {arm: p_clean[arm][:, None] - p_masked[arm] for arm in p_clean}  # [N, n]
    ncs = (drops["matched"] - drops["mismatched"]).mean(axis=0)  # [n]
    clean_odds = log_odds(p_clean["matched"])  # [N]
    odds_drop = (clean_odds[:, None] - log_odds(p_masked["matched"])).mean(axis=0)  # [n]
    p_drop = drops["matched"].mean(axis=0)  # [n]
    layer_ncs, cumulative_ncs = ncs[:n_layers], ncs[n_layers : 2 * n_layers]
    whole = float(cumulative_ncs[-1])
    profile = {
        "n_items": n_items,
        "corpus": corpus,
        "k": k,
        "layer ncs": [round(float(v), 4) for v in layer_ncs],
        "cumulative ncs": [round(float(v), 4) for v in cumulative_ncs],
        "all layers ncs": round(whole, 4),
        "largest layer share": round(float(layer_ncs.max() / whole), 3) if whole > 0 else float("nan"),
        "clean log-odds": {
            name: round(float(np.percentile(clean_odds, q)), 2)
            for name, q in (("median", 50), ("p10", 10), ("p90", 90))
        },
        "clean p median": round(float(np.median(p_clean["matched"])), 5),
        "random": {},
    }
    start = 2 * n_layers
    for size in random:
        chosen = slice(start, start + PROBE_RANDOM_SETS)
        profile["random"][size] = {
            "ncs": spread(ncs[chosen]),
            "p drop": spread(p_drop[chosen]),
            "log-odds drop": spread(odds_drop[chosen]),
        }
        start += PROBE_RANDOM_SETS
    return profile


def profile_line(profile: dict) -> str:
    """One line for a training log: the depth and saturation numbers the selection rule reads."""
    k = profile["k"]
    random = profile["random"][k]
    return (
        f"probe: layer ncs {' '.join(f'{v:.3f}' for v in profile['layer ncs'])}; all {profile['all layers ncs']:.3f}, "
        f"largest share {profile['largest layer share']:.2f}; "
        f"clean log-odds median {profile['clean log-odds']['median']:.2f}; "
        f"random k={k} NCS {random['ncs']['mean']:.4f} +- {random['ncs']['sd']:.4f}, "
        f"log-odds drop {random['log-odds drop']['mean']:.2f} +- {random['log-odds drop']['sd']:.2f}"
    )


def log_columns(profile: dict) -> dict:
    """The probe's numbers as flat training-log columns (probe_*)."""
    random = profile["random"][profile["k"]]
    return {
        "probe_largest_layer_share": profile["largest layer share"],
        "probe_all_layers_ncs": profile["all layers ncs"],
        "probe_logodds_median": profile["clean log-odds"]["median"],
        "probe_random_ncs_sd": round(random["ncs"]["sd"], 5),
        "probe_random_logodds_sd": round(random["log-odds drop"]["sd"], 3),
        **{f"probe_layer{layer}_ncs": value for layer, value in enumerate(profile["layer ncs"])},
    }


SELECTION_SEEDS = (0, 1, 2, 3, PROBE_SEED)  # TRAINING.md's rule (d): the median random k-set NCS SD over these draws


def random_sd_over_draws(lm, cache: ResultCache, seeds=SELECTION_SEEDS, n_items: int = 40, corpus: str = "co") -> dict:
    """The random k-set NCS SD of depth_profile at each seed (its items and its random sets) and their median: one
    draw of 20 sets is heavy-tailed (a set that takes a head the model needs dominates its SD)."""
    sds = {}
    for seed in seeds:
        profile = depth_profile(lm, cache, n_items, corpus, seed)
        sds[seed] = profile["random"][profile["k"]]["ncs"]["sd"]
    return {"random k NCS SD": sds, "median": float(np.median(list(sds.values())))}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="toy", help="a toy name (toy, toy-llava, ...) or a model folder")
    parser.add_argument("--n-items", type=int, default=40)
    parser.add_argument("--corpus", default="co")
    parser.add_argument(
        "--draws", action="store_true", help=f"also the random k-set NCS SD at seeds {SELECTION_SEEDS} and its median"
    )
    args = parser.parse_args()
    if args.n_items < 2:
        raise SystemExit(f"--n-items must be >= 2, got {args.n_items}")
    lm, cache = load_model(args.model), ResultCache(CACHE)
    profile = depth_profile(lm, cache, args.n_items, args.corpus)
    print(profile_line(profile))
    print(json.dumps(profile, indent=2))
    if args.draws:
        print(json.dumps(random_sd_over_draws(lm, cache, n_items=args.n_items, corpus=args.corpus), indent=2))


if __name__ == "__main__":
    main()
