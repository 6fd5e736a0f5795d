"""Discovery scores: how much attention each head sends from a source's rows to the asked-about panel.

For one strip item and one head (l, h), the score is the attention mass that the source rows send to
the image tokens of the asked-about panel p: a sum over p's keys, then an aggregate over the rows
(`row_agg`: "mean" or "max"). `key_agg` picks raw mass ("raw") or p's share of the head's attention to
the whole image ("share"). The three attention sources are read in ONE teacher-forced forward per
strip: prompt + the model's own greedy answer (causal attention makes the prompt rows identical to a
prompt-only forward):

    last  the last prompt token                  (Batch.last_prompt_mask)
    qsp   the query-span tokens that pick p      (Batch.query_mask)
    out   the tokens of the generated answer     (Batch.answer_mask)

Per-item, per-head results are cached on disk chunk by chunk (`helpers.storage.cache`), so the half-splits
and bootstraps of notebook 02 and a rerun after a crash need no new forward passes.
"""

import numpy as np
import torch

from helpers.engine.attention import Read, probe
from helpers.engine.inputs import Batch, build_batch
from helpers.engine.loading import LoadedModel
from helpers.engine.mcq import greedy_answers
from helpers.engine.model_files import model_identity
from helpers.stimuli.corpora import Item, corpus_key, items_of
from helpers.stimuli.design import CORPORA, QUERIES, SETTINGS, parse_setting
from helpers.storage.cache import ResultCache, computation_key

ROW_AGGREGATES = ("mean", "max")
KEY_AGGREGATES = ("raw", "share")


def source_rows(batch: Batch) -> dict[str, torch.Tensor]:
    """Source name -> bool [B, T] rows whose attention a discovery score reads."""
    return {"last": batch.last_prompt_mask, "qsp": batch.query_mask, "out": batch.answer_mask}


def target_panel_keys(lm: LoadedModel, batch: Batch) -> torch.Tensor:
    """Bool [B, T]: the image tokens of each item's asked-about panel."""
    return torch.stack(
        [
            lm.adapter.region_mask(batch.inputs, item.boxes[item.target], item.image.size, b)
            for b, item in enumerate(batch.items)
        ]
    )


def read_sources(lm: LoadedModel, batch: Batch, groups: dict[str, torch.Tensor]):
    """One forward reading, per row, the attention mass of every source's rows to each key group [B, T].

    Returns mass_per_row [B, L, H, R, G] (R: the union of the sources' rows, NaN-padded) and
    {source: bool [B, R]} saying which of those rows belong to each source."""
    sources = source_rows(batch)
    rows = sources["last"] | sources["qsp"] | sources["out"]  # [B, T]
    device = lm.model.device
    read = Read(query_rows=rows.to(device), groups={k: v.to(device) for k, v in groups.items()}, per_row=True)
    with probe(lm, read=read) as rec:
        lm.model(**{k: v.to(device) for k, v in batch.inputs.items()})
    positions = rec.row_positions.cpu()  # [B, R], -1 padded
    picked = {
        source: torch.stack(
            [mask[b, positions[b].clamp(min=0)] & (positions[b] >= 0) for b in range(len(batch.items))]
        )
        for source, mask in sources.items()
    }
    return rec.mass_per_row.float().cpu(), picked


@torch.no_grad()
def score_strips(lm: LoadedModel, items: list[Item]) -> dict[str, np.ndarray]:
    """Per-item, per-head discovery scores of every source, for every key and row aggregate.

    Returns arrays `{source}_{key_agg}_{row_agg}` of shape [N, L, H], `correct` [N] (the greedy answer
    equals the item's answer) and `answer_tokens` [N].
    """
    answers = greedy_answers(lm.model, lm.processor, items)
    empty = [i for i, a in enumerate(answers) if not a]
    if empty:
        raise RuntimeError(
            f"the model gave an empty greedy answer for strip item(s) {empty}; the 'out' source has no rows to read"
        )
    batch = build_batch(lm.processor, items, answers=answers)
    groups = {"panel": target_panel_keys(lm, batch), "image": batch.image_mask}
    per_row, picked = read_sources(lm, batch, groups)  # [B, L, H, R, 2], {source: [B, R]}
    values = {"raw": per_row[..., 0], "share": per_row[..., 0] / per_row[..., 1].clamp(min=1e-12)}
    out = {}
    for source, rows in picked.items():
        rows = rows[:, None, None, :]  # [B, 1, 1, R]
        count = rows.sum(-1).clamp(min=1)  # [B, 1, 1]
        for key_agg, value in values.items():  # value [B, L, H, R]
            out[f"{source}_{key_agg}_mean"] = (torch.where(rows, value, 0.0).sum(-1) / count).numpy()
            out[f"{source}_{key_agg}_max"] = torch.where(rows, value, -torch.inf).amax(-1).numpy()
    out["correct"] = np.array([a == item.answer for a, item in zip(answers, items)])
    out["answer_tokens"] = batch.answer_mask.sum(1).numpy()
    return out


def discover(
    lm: LoadedModel,
    corpus: str,
    query: str,
    n_strips: int,
    seed: int,
    cache: ResultCache,
    strips_per_forward: int = 16,
) -> dict[str, np.ndarray]:
    """score_strips over `n_strips` strips of `corpus` with `query`, cached per chunk of `strips_per_forward`
    (one forward each)."""
    key = computation_key(
        **model_identity(lm),
        corpus=corpus_key(corpus),
        params={"query": query, "seed": seed, "strips_per_forward": strips_per_forward},
        code_module=__name__,
    )
    return cache.cached_chunks(
        "discovery",
        key,
        n_strips,
        strips_per_forward,
        lambda start, stop: score_strips(lm, list(items_of(f"strip_{query}", corpus, n_strips, seed)[start:stop])),
        one_copy_per_item=True,  # one read row per strip
    )


def setting_scores(
    per_item: dict[str, np.ndarray], setting: str, key_agg: str = "raw", row_agg: str = "mean"
) -> np.ndarray:
    """The per-item scores [N, L, H] of one setting from `discover`'s output of its corpus and query."""
    if key_agg not in KEY_AGGREGATES:
        raise ValueError(f"key_agg={key_agg!r} is not allowed; allowed: {KEY_AGGREGATES}")
    if row_agg not in ROW_AGGREGATES:
        raise ValueError(f"row_agg={row_agg!r} is not allowed; allowed: {ROW_AGGREGATES}")
    return per_item[f"{parse_setting(setting).source}_{key_agg}_{row_agg}"]


@torch.no_grad()
def panel_profile(lm: LoadedModel, item: Item, head_sets: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Figure 1's view of one strip: for each source, the attention mass that the heads of
    `head_sets[source]` (bool [L, H]) send from that source's rows to every panel, averaged over the
    heads -> {source: [n_panels]} in panel order."""
    answer = greedy_answers(lm.model, lm.processor, [item])
    batch = build_batch(lm.processor, [item], answers=answer)
    panels = [name for name in item.boxes if name.startswith("panel")]
    groups = {name: lm.adapter.region_mask(batch.inputs, item.boxes[name], item.image.size)[None] for name in panels}
    per_row, picked = read_sources(lm, batch, groups)  # [1, L, H, R, panels]
    profile = {}
    for source, head_set in head_sets.items():
        mass = per_row[0][:, :, picked[source][0]].mean(2).numpy()  # [L, H, panels]
        profile[source] = mass[np.asarray(head_set, dtype=bool)].mean(0)
    return profile


def discover_all(
    lm: LoadedModel, n_strips: int, seed: int, cache: ResultCache, strips_per_forward: int = 16
) -> dict[tuple[str, str], dict[str, np.ndarray]]:
    """`discover` for every corpus x query -> {(corpus, query): per-item arrays}."""
    return {(c, q): discover(lm, c, q, n_strips, seed, cache, strips_per_forward) for c in CORPORA for q in QUERIES}


def all_setting_scores(
    per_item: dict[tuple[str, str], dict[str, np.ndarray]], key_agg: str = "raw", row_agg: str = "mean"
) -> dict[str, np.ndarray]:
    """{setting: per-item scores [N, L, H]} for all 12 settings from `discover_all`'s output."""
    return {
        s: setting_scores(per_item[parse_setting(s).corpus, parse_setting(s).query], s, key_agg, row_agg)
        for s in SETTINGS
    }
