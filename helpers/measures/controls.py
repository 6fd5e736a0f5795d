"""Head-sets that a discovered head-set S is compared with.

Random controls:
- layer-matched: the same number of heads in every layer as S, drawn from that layer's other heads
  (S's own heads excluded), so depth cannot explain a difference (with `spill`, a layer where S holds
  more than half the heads lends its excess to the nearest layers: layer_quota);
- layer- and attention-matched: as layer-matched, but each head of S is replaced by one of the `pool`
  heads of its layer whose attention mass (e.g. to the image) is nearest to its own, so neither depth
  nor how much the heads look at the image can explain a difference;
- any-layer: k heads drawn uniformly from all heads, ignoring layers (each setting its own draws).

Generic-damage sets (Table 12): the k heads with the most attention to a sink or to the text
(`top_k` of a mass map), whole layers, and large random sets.

S against its controls: `with_controls` stacks S and its R random sets [1 + R, L, H] for a run, and
`against_controls` / `with_effect` read that run's per-item values [N, 1 + R] (S in column 0) as the rows of the
causal tables (notebooks 04, 05, 06 and 08, the report card), by helpers.measures.stats.against_random:

    row = against_controls(ncs(exp.mask(exp.with_controls("co-ref-qsp", 20))))   # S, p, z, ... of Table 3's row

Masks are bool [L, H]; sets of sets are bool [n, L, H]. Draws are deterministic by seed: a named stream
of helpers/measures/streams.py (`stream(seed, "table12/random-2k")`), or an int in the tests. The first n draws
of a stream do not depend on how many follow, so R = 20 sets are the first 20 of the R = 250 sets.
"""

import math

import numpy as np
import pandas as pd

from helpers.measures import streams
from helpers.measures.necessity import drop, ncs
from helpers.measures.overlap import top_k
from helpers.measures.stats import against_random, t_interval

Seed = int | np.random.SeedSequence


def _check_room(head_set: np.ndarray, avoid: np.ndarray) -> np.ndarray:
    """S's head count per layer [L], after checking every layer has as many heads outside `avoid`."""
    counts = head_set.sum(1)  # [L]
    free = (~avoid).sum(1)  # [L]
    short = np.nonzero(counts > free)[0].tolist()
    if short:
        raise ValueError(
            f"layer(s) {short} hold more of S's heads ({counts[short].tolist()}) than heads outside S "
            f"and the excluded heads ({free[short].tolist()}): no layer-matched set fits there; use a smaller k, "
            "or spill=True to draw the excess from the nearest layers"
        )
    return counts


def _avoided(head_set: np.ndarray, exclude: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(S as bool [L, H], the heads a layer-matched draw avoids: S and `exclude` when given)."""
    head_set = np.asarray(head_set, dtype=bool)
    return head_set, head_set if exclude is None else head_set | np.asarray(exclude, dtype=bool)


def layer_quota(head_set: np.ndarray, avoid: np.ndarray, spill: bool) -> np.ndarray:
    """[L]: how many heads a layer-matched set draws from each layer's heads outside `avoid`. S's count per
    layer; with `spill`, a layer holding more of S's heads than it has heads outside `avoid` gives all of
    those and the excess comes from the nearest layers with room (by distance, the earlier layer first on a
    tie), so the set stays disjoint from S at the cost of matching depth only approximately there."""
    if not spill:
        return _check_room(head_set, avoid)
    counts, free = head_set.sum(1), (~avoid).sum(1)  # [L] each
    quota = np.minimum(counts, free)
    for layer in np.nonzero(counts > free)[0]:
        excess = int(counts[layer] - free[layer])
        for other in sorted(range(len(counts)), key=lambda o: (abs(o - layer), o)):
            take = min(excess, int(free[other] - quota[other]))
            quota[other] += take
            excess -= take
        if excess:
            raise ValueError(f"S has {int(counts.sum())} heads but only {int(free.sum())} heads lie outside it")
    return quota


def spill_note(head_set: np.ndarray, exclude: np.ndarray | None = None) -> str:
    """ "n from layer l, ..." for the heads a spilling layer-matched set of `head_set` draws beyond S's own count
    in a layer (outside `exclude` too, when given); "" when every layer has room."""
    head_set, avoid = _avoided(head_set, exclude)
    extra = layer_quota(head_set, avoid, spill=True) - head_set.sum(1)
    return ", ".join(f"{int(extra[layer])} from layer {layer}" for layer in np.nonzero(extra > 0)[0])


def spill_notes(head_sets: dict[str, np.ndarray]) -> str:
    """Where the layer-matched sets of `head_sets` ({name: [L, H]}) match depth only approximately:
    "name: n from layer l, ..." joined by "; ", or "" when every layer had room."""
    notes = {name: spill_note(head_set) for name, head_set in head_sets.items()}
    return "; ".join(f"{name}: {note}" for name, note in notes.items() if note)


def layer_matched_sets(
    head_set: np.ndarray, n: int, seed: Seed, exclude: np.ndarray | None = None, spill: bool = False
) -> np.ndarray:
    """[n, L, H]: n random sets with S's count per layer, each drawn from the layer's heads outside S
    (and outside `exclude` [L, H] when given). A layer without room raises, unless `spill` (layer_quota).
    Distinct: a draw that repeats an earlier set is drawn again, so a rank p over the sets is over distinct
    sets; only where n exceeds the number of distinct sets (layer_matched_count) do the sets beyond it repeat
    (control_schemes.distinct_columns finds their first draws). Where no draw repeats, the sets are the
    stream's plain draws."""
    head_set, avoid = _avoided(head_set, exclude)
    counts = layer_quota(head_set, avoid, spill)
    n_distinct = layer_matched_count(counts, avoid)
    rng = np.random.default_rng(seed)
    sets = np.zeros((n, *head_set.shape), dtype=bool)
    drawn = set()
    for draw in range(n):
        sets[draw] = _layer_matched_draw(counts, avoid, rng)
        while sets[draw].tobytes() in drawn and len(drawn) < n_distinct:
            sets[draw] = _layer_matched_draw(counts, avoid, rng)
        drawn.add(sets[draw].tobytes())
    return sets


def _layer_matched_draw(counts: np.ndarray, avoid: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """[L, H]: one set of counts[l] heads drawn from each layer l's heads outside `avoid`."""
    one = np.zeros(avoid.shape, dtype=bool)
    for layer in np.nonzero(counts)[0]:
        outside = np.nonzero(~avoid[layer])[0]
        one[layer, rng.choice(outside, counts[layer], replace=False)] = True
    return one


def layer_matched_count(counts: np.ndarray, avoid: np.ndarray) -> int:
    """How many distinct sets draw counts[l] heads from each layer l's heads outside `avoid` [L, H]: the product
    over layers of C(heads outside `avoid`, counts[l])."""
    free = (~avoid).sum(1)  # [L]
    return math.prod(math.comb(int(f), int(c)) for f, c in zip(free, counts))


def attention_matched_sets(head_set: np.ndarray, mass: np.ndarray, n: int, seed: Seed, pool: int = 3) -> np.ndarray:
    """[n, L, H]: n layer- and attention-matched random sets.

    mass: [L, H] a per-head attention statistic. In each draw and layer, S's heads are taken in random
    order and each is replaced by one of the `pool` not yet chosen heads outside S of that layer whose
    mass is nearest to its own (uniformly among those)."""
    head_set, mass = np.asarray(head_set, dtype=bool), np.asarray(mass, dtype=float)
    if mass.shape != head_set.shape:
        raise ValueError(f"mass has shape {mass.shape}; the head-set has {head_set.shape}")
    if pool < 1:
        raise ValueError(f"pool={pool} must be >= 1")
    counts = _check_room(head_set, head_set)
    rng = np.random.default_rng(seed)
    sets = np.zeros((n, *head_set.shape), dtype=bool)
    for draw in range(n):
        for layer in np.nonzero(counts)[0]:
            free = list(np.nonzero(~head_set[layer])[0])
            for head in rng.permutation(np.nonzero(head_set[layer])[0]):
                nearest = sorted(free, key=lambda h: (abs(mass[layer, h] - mass[layer, head]), h))[:pool]
                pick = nearest[rng.integers(len(nearest))]
                free.remove(pick)
                sets[draw, layer, pick] = True
    return sets


def any_layer_sets(shape: tuple[int, int], k: int, n: int, seed: Seed) -> np.ndarray:
    """[n, L, H]: n random sets of k heads each, drawn uniformly from all L x H heads."""
    n_heads = shape[0] * shape[1]
    if not 1 <= k <= n_heads:
        raise ValueError(f"k={k} heads cannot be drawn from {shape[0]} x {shape[1]} = {n_heads} heads")
    rng = np.random.default_rng(seed)
    sets = np.zeros((n, n_heads), dtype=bool)
    for draw in range(n):
        sets[draw, rng.choice(n_heads, k, replace=False)] = True
    return sets.reshape(n, *shape)


def layer_matched_controls(head_set: np.ndarray, setting: str, n: int, seed: int) -> np.ndarray:
    """[n, L, H]: the layer-matched random sets of a setting's discovered set, from the stream
    "layer-matched/<setting>", so every notebook and table draws the same controls (the first n); a layer without
    room spills (layer_quota; spill_note says where)."""
    stream = streams.stream(seed, "layer-matched/{setting}", setting=setting)
    return layer_matched_sets(head_set, n, stream, spill=True)


def per_layer_controls(head_set: np.ndarray, setting: str, n: int, seed: int) -> np.ndarray:
    """[n, L, H]: the layer-matched random sets of a setting's top-k-per-layer set, from the stream
    "table13/per-layer/<setting>", so Tables 5 (04) and 13 (05) draw the same controls (the first n)."""
    return layer_matched_sets(head_set, n, streams.stream(seed, "table13/per-layer/{setting}", setting=setting))


def with_controls(head_set: np.ndarray, controls: np.ndarray) -> np.ndarray:
    """[1 + R, L, H]: S first, then its R random sets, the stack every S-against-random run takes."""
    return np.concatenate([np.asarray(head_set, dtype=bool)[None], np.asarray(controls, dtype=bool)])


def against_controls(values: np.ndarray, distinct: np.ndarray | None = None) -> dict:
    """`against_random` of S (column 0) and its random sets (the other columns) of per-item values [N, 1 + R];
    `distinct`: the random columns that are distinct sets, where the draw repeats sets."""
    return against_random(values[:, 0], values[:, 1:], distinct)


def with_effect(values: np.ndarray, distinct: np.ndarray | None = None) -> dict:
    """`against_controls` and the effect: S's per-item excess over the mean of its (distinct) random sets, with
    its 95% t-interval over items."""
    random = values[:, 1:] if distinct is None else values[:, 1:][:, distinct]  # [N, R]
    effect, low, high = t_interval(values[:, 0] - random.mean(1))
    return {**against_controls(values, distinct), "effect": effect, "effect low": low, "effect high": high}


def whole_layers(head_set: np.ndarray, n_layers: int) -> np.ndarray:
    """[L, H]: every head of the `n_layers` layers that hold the fewest of S's heads (ties: the layers
    nearest the middle of the network), a generic-damage set of whole layers that avoids S."""
    head_set = np.asarray(head_set, dtype=bool)
    total = head_set.shape[0]
    if not 1 <= n_layers <= total:
        raise ValueError(f"n_layers={n_layers} whole layers cannot be taken from {total} layers")
    middle = (total - 1) / 2
    order = sorted(range(total), key=lambda layer: (head_set[layer].sum(), abs(layer - middle), layer))
    out = np.zeros_like(head_set)
    out[order[:n_layers]] = True
    return out


def generic_damage_sets(head_set: np.ndarray, k: int, mass: dict[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
    """Name -> [L, H]: S, then Table 12's generic-damage sets: the k heads with the most attention to the first
    token (sinks) and to the text (`mass`: helpers.measures.head_mass maps [L, H]), the whole layers holding the fewest
    of S's heads (about k heads), and any-layer random sets of 2k and 4k heads from their named streams."""
    head_set = np.asarray(head_set, dtype=bool)
    shape, n_all = head_set.shape, head_set.size
    return {
        "discovered": head_set,
        "attention sinks": top_k(mass["first"], k),
        "text-heavy heads": top_k(mass["text"], k),
        "whole layers": whole_layers(head_set, max(1, round(k / shape[1]))),
        "random 2k": any_layer_sets(shape, min(2 * k, n_all), 1, streams.stream(seed, "table12/random-2k"))[0],
        "random 4k": any_layer_sets(shape, min(4 * k, n_all), 1, streams.stream(seed, "table12/random-4k"))[0],
    }


def damage_table(sets: dict[str, np.ndarray], image_run: dict, text_run: dict) -> pd.DataFrame:
    """Table 12's columns per damage set: the drops of both image arms and NCS under the image hidden
    (`image_run`), the text arm's drop under the text hidden (`text_run`), both necessity runs of the stacked
    `sets` (the first is S), and each set's overlap with S."""
    stack = np.stack(list(sets.values()))  # [n, L, H]
    return pd.DataFrame(
        {
            "damage set": list(sets),
            "heads": stack.sum((1, 2)),
            "matched drop": drop(image_run, "matched").mean(0),
            "mismatched drop": drop(image_run, "mismatched").mean(0),
            "NCS": ncs(image_run).mean(0),
            "NCS-v2": drop(image_run, "matched").mean(0),
            "text-arm drop (text hidden)": drop(text_run, "text").mean(0),
            "overlap with S": (stack & stack[0]).sum((1, 2)),
        }
    )
