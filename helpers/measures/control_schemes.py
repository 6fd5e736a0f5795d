"""The random controls the field's repositories draw, as named, seeded schemes beside ours (issue 40).

Our controls (helpers/measures/controls.py) are layer-matched (S's count in every layer, from the
layer's heads outside S) and any-layer (k heads from all heads). Published visual- and retrieval-head
code draws its random heads otherwise; each scheme here re-implements one such draw from its released
code (read, not copied; the deviations are stated per function):

- "bottom5": k heads from the heads whose discovery score is at or below its 5th percentile, S
  excluded (rohitgandikota/gaze-heads);
- "same-band": S's count in each third of the layers (early / middle / late), from that band's heads
  outside S (jing-bi/visual-head);
- "uniform-excluding": k heads from all heads outside S (baekingeol/OCR_Head with --no_intersection;
  what nightdessert/Retrieval_Head and CR400AF-A/SparseMM intend, their exclusion test never matching);
- "uniform-overlapping": k heads from all heads, S's included (TianyunYoung/Hallucination-Attribution,
  OCR_Head by default, Retrieval_Head in effect); the distribution of any-layer, its own stream;
- "per-layer-uniform": CR400AF-A/SparseMM's random mask (sparsemm/sparsemm_utils.py, `init_mask`), which
  every attention layer draws for itself: each layer draws k distinct (layer, head) cells uniformly and
  masks its own heads among them, so the set's size varies around k from draw to draw (the table gives
  its spread). Its harness (lmms-eval/lmms_eval/__main__.py, `--seed` default "0,1234,1234,1234", passed
  to lmms_eval/evaluator.py `simple_evaluate`) calls random.seed(0) before the layers draw, so one run's
  mask is one fixed draw of this distribution, not an unseeded one;
- "unseeded": the uniform-overlapping draw under UNSEEDED_SEEDS different seeds, to show how far the
  verdict of one unseeded draw depends on the seed (Retrieval_Head sets no seed and draws a new set for
  every context length x depth cell of a run: many unseeded draws, each judged on its own cell).

Every draw is deterministic by its named stream of helpers/measures/streams.py (STREAM_OF), keyed by the
set's name (a setting's, in notebooks 05 and 07), so the notebook and the report card draw the same sets.
Masks are bool [L, H]; draws [n, L, H].
"""

import numpy as np

from helpers import sizes
from helpers.measures import names, streams
from helpers.measures.controls import Seed, any_layer_sets, layer_matched_controls, layer_matched_sets

SCHEMES = names.CONTROL_SCHEMES  # the registry (helpers/measures/names.py)
STREAM_OF = {
    "layer-matched": "layer-matched/{setting}",
    "any-layer": "table03/any-layer/{setting}",
    "bottom5": "control-schemes/bottom5/{setting}",
    "same-band": "control-schemes/same-band/{setting}",
    "uniform-excluding": "control-schemes/uniform-excluding/{setting}",
    "uniform-overlapping": "control-schemes/uniform-overlapping/{setting}",
    "per-layer-uniform": "control-schemes/per-layer-uniform/{setting}",
    "unseeded": "control-schemes/unseeded/{setting}/seed{draw}",
}
# Where each scheme comes from (repository: file: function), for tables and the report card.
SOURCE = {
    "layer-matched": "this paper (helpers/measures/controls.py: layer_matched_sets)",
    "any-layer": "this paper (helpers/measures/controls.py: any_layer_sets)",
    "bottom5": "rohitgandikota/gaze-heads: gaze_heads/gaze.py: sample_non_gaze_heads",
    "same-band": "jing-bi/visual-head: llava/eval/att_utils.py: sample_heads",
    "uniform-excluding": "baekingeol/OCR_Head: exp_masking.py: main (--is_all_random --no_intersection)",
    "uniform-overlapping": "TianyunYoung/Hallucination-Attribution: LLaVA/eval_scripts/analyze_attention_reweight.py: "
    "eval_model (--random_heads)",
    "per-layer-uniform": "CR400AF-A/SparseMM: sparsemm/sparsemm_utils.py: init_mask (METHOD other than 'mask', "
    "called by every attention module, e.g. sparsemm/qwen_model.py: qwen_flash_attn2_forward_Mask)",
    "unseeded": "nightdessert/Retrieval_Head: needle_in_haystack_with_mask.py: construct_random_head",
}
BOTTOM_Q = 5.0  # gaze-heads' --nongaze-percentile default
N_BANDS = 3  # visual-head's early / middle / late


def check_scheme(scheme: str) -> str:
    """`scheme` if it is a known control scheme, else a ValueError naming it and the known ones."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown control scheme {scheme!r}; known: {', '.join(SCHEMES)}")
    return scheme


def bottom_q_sets(head_set: np.ndarray, scores: np.ndarray, n: int, seed: Seed, q: float = BOTTOM_Q) -> np.ndarray:
    """[n, L, H]: n random sets of S's size k from the heads whose score is at or below the q-th percentile
    of `scores` [L, H] (numpy's linear interpolation), S's heads excluded; when that pool holds fewer than k
    heads, every set is the whole pool (fewer heads than S).

    Re-implements rohitgandikota/gaze-heads, gaze_heads/gaze.py, `sample_non_gaze_heads` as its scripts
    03-05 call it (cutoff `np.percentile(gaze_scores, 5.0)`, heads with score > cutoff skipped, the top-k
    gaze heads excluded, a torch.randperm seeded by --seed 42 taking the first min(100, pool) candidates).
    Deviations: S's own size k instead of the fixed 100 (--top-k-random); n seeded draws from a named
    stream where gaze-heads makes one draw. Its cap is kept: on Qwen3-VL-8B (36 x 32 = 1,152 heads) its
    bottom 5% holds about 58 heads, so its "100 random heads" are those ~58, the same set at every seed."""
    head_set = np.asarray(head_set, dtype=bool)
    scores = np.asarray(scores, dtype=float)
    if scores.shape != head_set.shape:
        raise ValueError(f"scores have shape {scores.shape}; the head-set has {head_set.shape}")
    if not np.isfinite(scores).all():
        raise ValueError(f"scores hold {int((~np.isfinite(scores)).sum())} non-finite value(s); every head needs one")
    if not 0 < q <= 100:
        raise ValueError(f"q={q!r}: the bottom share must lie in (0, 100] percent")
    pool = (scores <= np.percentile(scores, q)) & ~head_set
    if not pool.any():
        raise ValueError(f"no head outside S lies in the bottom {q:g}% of the scores; use a larger q")
    k = int(head_set.sum())
    if pool.sum() <= k:
        return np.repeat(pool[None], n, axis=0)
    flat = head_set.reshape(1, -1)
    return layer_matched_sets(flat, n, seed, exclude=~pool.reshape(1, -1)).reshape(n, *head_set.shape)


def layer_bands(n_layers: int, n_bands: int = N_BANDS) -> np.ndarray:
    """[L] the band of every layer: layer l is in band floor(n_bands * l / L) (thirds: early, middle, late)."""
    if not 1 <= n_bands <= n_layers:
        raise ValueError(f"n_bands={n_bands} bands cannot split {n_layers} layers")
    return (n_bands * np.arange(n_layers)) // n_layers


def same_band_sets(head_set: np.ndarray, n: int, seed: Seed, n_bands: int = N_BANDS) -> np.ndarray:
    """[n, L, H]: n random sets with S's head count in every band of layers (layer_bands), each drawn
    uniformly from the band's heads outside S (any layer of the band).

    Re-implements jing-bi/visual-head, llava/eval/att_utils.py, `sample_heads(model, stage, k, top_heads)`:
    random.sample of k heads of one stage's layers, minus `top_heads`, after random.seed(sha256(model name)
    mod 1e8). Deviations: its sets come from one stage, so a set spanning bands keeps its count per band
    here; bands are computed thirds where it hard-codes them per model size (7b: layers 0-9 / 10-19 /
    20-31, 13b: 0-12 / 13-26 / 27-39, 8b and phi: 0-7 / 8-15 / 16-23); n draws from a named stream per
    set where its seed depends on the model name only (one draw, the same for every set of a model); its
    `get_heads(..., type="others")` passes every head listed for the stage as `top_heads`, not only S."""
    head_set = np.asarray(head_set, dtype=bool)
    n_layers, n_heads = head_set.shape
    bands = layer_bands(n_layers, n_bands)
    width = np.bincount(bands, minlength=n_bands).max() * n_heads
    # each band as one row of its heads (layer-major), padded with heads that do not exist (excluded)
    rows, columns = bands[:, None].repeat(n_heads, 1), np.zeros((n_layers, n_heads), dtype=int)
    for band in range(n_bands):
        layers = np.nonzero(bands == band)[0]
        columns[layers] = (np.arange(len(layers))[:, None] * n_heads + np.arange(n_heads)).reshape(len(layers), -1)
    by_band = np.zeros((n_bands, width), dtype=bool)
    by_band[rows, columns] = head_set
    padding = np.ones((n_bands, width), dtype=bool)
    padding[rows, columns] = False
    drawn = layer_matched_sets(by_band, n, seed, exclude=padding)  # [n, n_bands, width]
    return drawn[:, rows, columns]


def uniform_sets(head_set: np.ndarray, n: int, seed: Seed, exclude_set: bool) -> np.ndarray:
    """[n, L, H]: n random sets of S's size k drawn uniformly from all heads, S's heads excluded or not.

    exclude_set=True re-implements baekingeol/OCR_Head, exp_masking.py, `main` with --is_all_random
    --no_intersection (random.sample of the heads not in the retrieval-head file, after random.seed(--seed)),
    and what nightdessert/Retrieval_Head (needle_in_haystack_with_mask.py, `construct_random_head`) and
    CR400AF-A/SparseMM (sparsemm/sparsemm_utils.py, `init_mask`) mean to draw; their test for the discovered
    heads compares a tuple with lists (and SparseMM's swaps layer and head), so it never excludes one
    (SparseMM's draw per layer is per_layer_uniform_sets).
    exclude_set=False re-implements TianyunYoung/Hallucination-Attribution,
    LLaVA/eval_scripts/analyze_attention_reweight.py, `eval_model` with --random_heads (random.sample of
    --top_k heads of all 32 x 32, after transformers.set_seed(42) and the image sampling that shares its
    stream): any_layer_sets' distribution. Deviations: n draws from a named stream; k = S's size; L x H of
    the model where Retrieval_Head and Hallucination-Attribution hard-code 32 x 32 (SparseMM draws heads
    from range(number of layers): 28 x 28 on Qwen)."""
    head_set = np.asarray(head_set, dtype=bool)
    if not exclude_set:
        return any_layer_sets(head_set.shape, int(head_set.sum()), n, seed)
    flat = head_set.reshape(1, -1)
    return layer_matched_sets(flat, n, seed).reshape(n, *head_set.shape)


def per_layer_uniform_sets(head_set: np.ndarray, n: int, seed: Seed) -> np.ndarray:
    """[n, L, H]: n random sets as CR400AF-A/SparseMM's random mask (sparsemm/sparsemm_utils.py, `init_mask`)
    is drawn. `init_mask(self)` runs in every attention module's forward (sparsemm/qwen_model.py,
    `qwen_flash_attn2_forward_Mask`; llama_model.py, mistral_model.py alike) and stores on that module its own
    list of num distinct (l, h) cells drawn with random.choices, one Python stream across the layers; layer i
    then zeroes the queries of heads h of the cells with l == i in its own list. So each layer masks its row of
    an independent uniform draw of num cells, and the set's size (the sum over layers) varies around num.
    Here num = k (S's size) and every layer draws k distinct cells of the model's L x H heads; S's heads are
    not excluded (their exclusion test never matches, see uniform_sets). Deviations: a named stream; L x H of
    the model where SparseMM draws both l and h from range(number of layers) (28 x 28 on Qwen)."""
    head_set = np.asarray(head_set, dtype=bool)
    n_layers, n_heads = head_set.shape
    k = int(head_set.sum())
    rng = np.random.default_rng(seed)
    sets = np.zeros((n, n_layers, n_heads), dtype=bool)
    for draw in range(n):
        for layer in range(n_layers):
            cells = rng.choice(n_layers * n_heads, k, replace=False)  # this layer's own draw of k cells
            own = cells[cells // n_heads == layer] % n_heads
            sets[draw, layer, own] = True
    return sets


def scheme_stream(scheme: str, seed: int, setting: str, draw: int = 0) -> np.random.SeedSequence:
    """The named stream (helpers/measures/streams.STREAMS) of `scheme`'s draws for the set named `setting`."""
    template = STREAM_OF[check_scheme(scheme)]
    return streams.stream(seed, template, setting=setting, draw=draw)


def scheme_sets(
    scheme: str, head_set: np.ndarray, setting: str, n: int, seed: int, scores: np.ndarray | None = None
) -> np.ndarray:
    """[n, L, H]: the first n random sets of `scheme` for S named `setting`, from the scheme's stream under the
    run's `seed`; "bottom5" needs the discovery `scores` [L, H]; "unseeded" has its own `unseeded_sets`."""
    check_scheme(scheme)
    head_set = np.asarray(head_set, dtype=bool)
    if scheme == "layer-matched":
        return layer_matched_controls(head_set, setting, n, seed)  # the draws of notebooks 03-05
    if scheme == "unseeded":
        raise ValueError("the unseeded scheme draws one stack per seed: use unseeded_sets")
    rng = scheme_stream(scheme, seed, setting)
    if scheme == "any-layer":
        return any_layer_sets(head_set.shape, int(head_set.sum()), n, rng)
    if scheme == "bottom5":
        if scores is None:
            raise ValueError("the bottom5 scheme needs the discovery scores [L, H] of every head")
        return bottom_q_sets(head_set, scores, n, rng)
    if scheme == "same-band":
        return same_band_sets(head_set, n, rng)
    if scheme == "per-layer-uniform":
        return per_layer_uniform_sets(head_set, n, rng)
    return uniform_sets(head_set, n, rng, exclude_set=scheme == "uniform-excluding")


def unseeded_sets(
    head_set: np.ndarray, setting: str, n_per_seed: int, seed: int, n_seeds: int = sizes.UNSEEDED_SEEDS
) -> np.ndarray:
    """[n_seeds, n_per_seed, L, H]: the uniform-overlapping draw of n_per_seed sets under n_seeds seeds (the
    streams "control-schemes/unseeded/<setting>/seed<j>"): what n_seeds unseeded draws might have been.

    Stands for nightdessert/Retrieval_Head (needle_in_haystack_with_mask.py, `construct_random_head`: no
    seed is set, and a new set is drawn for every context length x depth cell of a run, each cell's score from
    its own set), which draws uniformly with a duplicate check and an exclusion that never matches, hence the
    overlapping draw here; a seed here stands for one such unseeded draw. Not for CR400AF-A/SparseMM: its
    harness seeds Python's random with 0 (see the module docstring; its draw is per_layer_uniform_sets)."""
    if n_seeds < 1:
        raise ValueError(f"n_seeds={n_seeds} must be >= 1")
    return np.stack(
        [
            uniform_sets(head_set, n_per_seed, scheme_stream("unseeded", seed, setting, j), False)
            for j in range(n_seeds)
        ]
    )


def unique_sets(sets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(unique [u, L, H] in first-seen order, inverse [n]): sets[i] == unique[inverse[i]], so a run of the
    unique sets gives every set's values (bottom5 repeats its whole pool when the pool is small)."""
    sets = np.asarray(sets, dtype=bool)
    flat = sets.reshape(len(sets), -1)
    _, first, inverse = np.unique(flat, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first)  # unique rows by first appearance
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return sets[first[order]], rank[inverse.ravel()]


def distinct_columns(sets: np.ndarray) -> np.ndarray:
    """Indices of the first draw of each distinct set among `sets` [n, L, H], in draw order: the random sets a
    rank p is taken over (a set drawn twice is one random set, not two)."""
    _, inverse = unique_sets(sets)
    _, first = np.unique(inverse, return_index=True)
    return np.sort(first)
