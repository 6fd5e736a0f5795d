"""The sizes of a report card (notebook 07_protocol) by profile, and the forward passes they cost.

Kept apart from helpers/protocol.py (which loads the model) so that parameter checks and the runner's
forward-pass estimate can read them without importing torch.
"""

from helpers.runner.sizes import UNSEEDED_SEEDS

# Sizes per profile (the notebooks' `profile`; the command's --profile quick is "default").
# default: notebooks 03-05's draws and settings at half their items (their cached chunks are read back),
# the discovery ceiling on half 01's strips; paper: N = 400 items, >= 100 random sets.
PROFILES = {
    "default": {
        "n_items": 50,
        "n_random": 20,
        "n_random_any": 20,
        "n_sweep": 5,
        "betas": [1, 10, 100],
        "n_strips": 200,
        "n_splits": 200,
    },
    "paper": {
        "n_items": 400,
        "n_random": 100,
        "n_random_any": 100,
        "n_sweep": 5,
        "betas": [1, 3, 10, 100, 1000, 10000],
        "n_strips": 400,
        "n_splits": 200,
    },
}
# smoke: every code path in seconds (n_strips as 01_discovery's smoke run, so its cached scores are read)
SMOKE_SIZES = {
    "n_items": 8,
    "n_random": 3,
    "n_random_any": 3,
    "n_sweep": 2,
    "betas": [1, 10],
    "n_strips": 8,
    "n_splits": 5,
}


def sizes_for(profile: str, overrides: dict, smoke: bool) -> dict:
    """The sizes of a run: the profile's, then `overrides` (unknown names raise), then smoke's minimums."""
    sizes = dict(PROFILES[profile])
    unknown = sorted(set(overrides) - set(sizes))
    if unknown:
        raise ValueError(f"sizes {unknown} are not known; known: {sorted(sizes)}")
    sizes.update(overrides)
    if smoke:
        sizes.update({n: v if n == "betas" else min(sizes[n], v) for n, v in SMOKE_SIZES.items()})
    return sizes


def forward_copies(sizes: dict, n_sets: int = 1, controls: str | None = None) -> dict[str, int]:
    """Forward copies (one item under one head-set, or one clean forward) of a report card, per part; with a
    control scheme (`controls`), its NCS line (S + R sets, or S + one set per seed of the unseeded scheme)."""
    n, r = sizes["n_items"], sizes["n_random"]
    stack = 1 + r
    per_set = {
        "CERS (S + R, two steer targets)": stack * 2 * n,
        "CERS any-layer (R, two targets)": sizes["n_random_any"] * 2 * n,
        "beta sweep (S + sweep sets, two targets)": len(sizes["betas"]) * (1 + min(sizes["n_sweep"], r)) * 2 * n,
        "NCS (S + R, two arms)": stack * 2 * n,
        "NCS_grid (S + R, two hidden cells)": stack * 2 * n,
        "row groups (question+option, last)": 2 * stack * 2 * n,
        "generic damage (6 sets, two arms + text arm)": 6 * 3 * n,
    }
    if controls:
        n_scheme = UNSEEDED_SEEDS if controls == "unseeded" else r
        per_set[f"NCS vs {controls} (S + {n_scheme}, two arms)"] = (1 + n_scheme) * 2 * n
    copies = {name: value * n_sets for name, value in per_set.items()}
    copies["clean forwards (audit, masses, per-run baselines)"] = 6 * n + 12 * n * n_sets
    copies["discovery (generation + read per strip)"] = 2 * sizes["n_strips"] * n_sets
    return copies
