"""The sizes of each analysis under a `profile`: every size of the companion, in a module that imports nothing.

Profiles (the notebooks' `profile` parameter):
- "default": today's CPU sizes, taken from the notebook's own size parameters (n_items, n_random, ...);
- "paper": the paper's protocol (its Table 28): N = 400 items, R = 20 layer-matched random sets, 250 for
  the referring + query-span sets in Tables 3 (NCS), 10 and 14 (k = 100), 100 for the grid contrast of
  Tables 6 / 16 on 120 items, 5 for Table 18's beta sweep on 200 items, 2,000 bootstrap resamples; notebook
  06: 400 discovery strips, 100 random sets for Table 16 and 80 items per pointing task.
A smoke run shrinks every size to at most SMOKE_SIZES, whatever the profile says: its R is at most SMOKE_RANDOM
in every analysis. The report card (notebook 07, `python -m helpers.protocol`) has its own sizes per profile,
CARD_SIZES, at the end of this module. The named random streams the draws come from are in
helpers/measures/streams.py.

    R = sizes.n_random(P, "table03_ncs", setting)    # the R of one row of one table
"""

PROFILE_NAMES = ("default", "paper")
REF_QSP = ("cm-ref-qsp", "co-ref-qsp")
# Sizes the "paper" profile sets in place of the notebook parameters of the same name.
PAPER_SIZES = {
    "n_items": 400,
    "n_eval": 400,  # notebook 08: evaluation items of the methods' NCS and CERS (its n_items are discovery strips)
    "n_random": 20,
    "n_random_large": 250,
    "n_boot": 2000,
    "n_strips": 400,  # discovery strips per corpus x query (01's default; 06 runs 40 on CPU)
    "n_random_grid": 100,  # Table 16's layer-matched sets
    "n_pointing": 80,  # items per pointing task (Tables 23, 26, 27)
}
# The R of a smoke run, whatever the profile: at most this many random sets in every analysis (sizes.n_random), the
# grid contrast and the report card.
SMOKE_RANDOM = 3
# Sizes of a smoke run (`smoke=True`), whatever the profile: each notebook parameter of these names is shrunk to at
# most its value (helpers.runner.params.validate), enough to exercise every code path in seconds.
SMOKE_SIZES = {
    "n_items": 8,
    "n_eval": 8,
    "n_strips": 8,
    "n_random": SMOKE_RANDOM,
    "n_random_large": SMOKE_RANDOM,
    "n_splits": 5,
    "n_boot": 50,
    "n_pointing": 4,
    "n_random_grid": SMOKE_RANDOM,
}

# Item pairs of notebook 06's single-head necessity profile
# (helpers.studies.cross_model.resolution.single_head_run): L * H head-sets of one head, both NCS arms, per model
# (128 heads of a toy: about 1 s of CPU per item); a smoke run takes SMOKE_SINGLE_HEAD_ITEMS whatever the profile.
SINGLE_HEAD_ITEMS = {"default": 20, "paper": 40}
SMOKE_SINGLE_HEAD_ITEMS = 4
# Item pairs of 06's depth probe per model (helpers.toy.probe: one forward per layer, per cumulative layer range
# and per random k- or 2k-set); a smoke run takes SMOKE_SINGLE_HEAD_ITEMS.
PROBE_ITEMS = {"default": 40, "paper": 40}
PROBE_RANDOM_SETS = 20  # the depth probe's uniform random sets per size (k and 2k), under every profile

# R per analysis: {profile: R} where R is an int or the notebook parameter that gives it; an analysis
# whose referring + query-span rows use another R lists it under "ref-qsp".
RANDOM_SETS = {
    "table03_cers": {"default": "n_random", "paper": 20},
    "table03_ncs": {"default": "n_random", "paper": 20, "ref-qsp": {"default": "n_random", "paper": 250}},
    "table05": {"default": "n_random", "paper": 20},
    "table06": {"default": "n_random", "paper": 100},
    "table09": {"default": "n_random", "paper": 20},
    "table10": {"default": "n_random_large", "paper": 250},
    "table13": {"default": "n_random", "paper": 20},
    "table14": {"default": "n_random", "paper": 20},
    "table14_k100": {"default": "n_random", "paper": 250},
    "table15": {"default": "n_random", "paper": 20},
    "table17": {"default": "n_random", "paper": 20},
    "table18": {"default": 5, "paper": 5},  # the beta sweep's first random sets of Table 3 (at most its R)
    # notebook 05's control schemes (helpers/measures/control_schemes.py): R sets per scheme and setting
    # (the layer-matched row is Table 3's run, read back), and the sets of each of the unseeded draw's seeds
    # (one: Retrieval_Head, unseeded, draws a new set for every context length x depth cell and scores the cell
    # with it, so each seed here stands for one cell's draw)
    "control_schemes": {"default": "n_random", "paper": 20},
    "control_schemes_unseeded": {"default": 1, "paper": 1},
    # notebook 05's masking table: three sets' S + R under each of the field's masking implementations
    "masking": {"default": "n_random", "paper": 20},
    # notebook 08: each published method's top-k set against its layer-matched sets, and the any-layer sets all
    # methods share (every method's set has the same k). Its default n_random is the R at which Holm across the 9
    # methods can reach .05 (179); the paper has no such table, so its profile takes the same R
    "methods": {"default": "n_random", "paper": 179},
    "methods_any_layer": {"default": "n_random", "paper": 179},
}


# Items per analysis where the paper's Table 28 gives other than the notebook's N: {profile: N}, where N is an int
# or the notebook parameter that gives it; a smoke run takes at most its n_items.
EVAL_ITEMS = {
    "table06": {"default": "n_items", "paper": 120},  # Tables 6 and 16: the leak-audited grid
    "table18": {"default": "n_items", "paper": 200},  # CERS against beta
}


def n_items(params, analysis: str) -> int:
    """N for `analysis` (a key of EVAL_ITEMS) under the run's profile."""
    value = EVAL_ITEMS[analysis][params.profile]
    size = getattr(params, value) if isinstance(value, str) else value
    return min(size, params.n_items) if params.smoke else size


def n_random(params, analysis: str, setting: str | None = None) -> int:
    """R for `analysis` (a key of RANDOM_SETS) under the run's profile; `setting` picks its ref-qsp R."""
    spec = RANDOM_SETS[analysis]
    if setting in REF_QSP and "ref-qsp" in spec:
        spec = spec["ref-qsp"]
    value = spec[params.profile]
    size = getattr(params, value) if isinstance(value, str) else value
    return min(size, SMOKE_RANDOM) if params.smoke else size


def single_head_items(params) -> int:
    """Item pairs of 06's single-head profile under the run's profile (SINGLE_HEAD_ITEMS; smoke: at most
    SMOKE_SINGLE_HEAD_ITEMS)."""
    size = SINGLE_HEAD_ITEMS[params.profile]
    return min(size, SMOKE_SINGLE_HEAD_ITEMS) if params.smoke else size


def probe_items(params) -> int:
    """Item pairs of 06's depth probe under the run's profile (PROBE_ITEMS; smoke: SMOKE_SINGLE_HEAD_ITEMS)."""
    size = PROBE_ITEMS[params.profile]
    return min(size, SMOKE_SINGLE_HEAD_ITEMS) if params.smoke else size


# Seeds of notebook 05's "unseeded" control scheme (helpers/measures/control_schemes.py): the spread of its verdict
# over 20 unseeded runs.
UNSEEDED_SEEDS = 20

# ------------------------------------------ the report card (notebook 07, helpers/studies/protocol)

# Sizes per profile (the notebooks' `profile`, the command's --profile).
# default: notebooks 03-05's draws and settings at half their items (their cached chunks are read back),
# the discovery ceiling on half 01's strips; paper: N = 400 items, >= 100 random sets.
CARD_SIZES = {
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
# smoke: every code path in seconds (the notebooks' smoke sizes, so 01_discovery's cached scores are read)
CARD_SMOKE_SIZES = {
    "n_items": SMOKE_SIZES["n_items"],
    "n_random": SMOKE_RANDOM,
    "n_random_any": SMOKE_RANDOM,
    "n_sweep": 2,
    "betas": [1, 10],
    "n_strips": SMOKE_SIZES["n_strips"],
    "n_splits": SMOKE_SIZES["n_splits"],
}


def card_sizes(profile: str, overrides: dict, smoke: bool) -> dict:
    """The sizes of a report card: the profile's, then `overrides` (unknown names raise), then smoke's minimums."""
    sizes = dict(CARD_SIZES[profile])
    unknown = sorted(set(overrides) - set(sizes))
    if unknown:
        raise ValueError(f"sizes {unknown} are not known; known: {sorted(sizes)}")
    sizes.update(overrides)
    if smoke:
        sizes.update({n: v if n == "betas" else min(sizes[n], v) for n, v in CARD_SMOKE_SIZES.items()})
    return sizes


def card_forward_copies(sizes: dict, n_sets: int = 1, controls: str | None = None) -> dict[str, int]:
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
