"""QRHead, query-focused retrieval heads (Zhang et al., "Query-Focused Retrieval Heads Improve Long-Context Reasoning
and Re-ranking", EMNLP 2025).

Source: princeton-pli/QRHead, src/qrretriever/attn_retriever.py
``AttnBasedRetriever.score_docs_per_head_for_detection`` and ``score_per_token_attention_to_query``, scored by
exp_scripts/detection/detect_qrhead_lme.py ``lme_eval``. The prompt is [instruction, docs, late instruction +
"Query: <q>" + chat suffix]; the QUERY-SPAN rows (late instruction to the end of the prompt) attend to every token;
their attention is averaged over the query rows, per head and key token. The same is computed with the null query
"N/A" in place of <q> (the prompt up to the query span is the same tokens), and subtracted: calibrated per-token
scores. Per document, tokens whose calibrated score is below the document's mean - 2 std (unbiased) are dropped and
the rest summed: a doc score per head. The LME QRScore of a head is the sum of its gold documents' scores, averaged
over queries; the top 16 heads are QRHead. The paper validates by retrieval quality (LongMemEval, CLIPPER, BEIR
nDCG@10) and downstream long-context QA.

Here: the documents are the item's regions (a strip's panels, a grid's cells), their tokens the image tokens
overlapping each box; the gold document is the asked-about region; the query rows are the item's prompt text and the
chat suffix after it (to the last prompt token); the null item has the query span replaced by "N/A". One forward of
[item, null item] per item, read by the probe with one key group per image token.

Deviations: the documents are image regions, not text paragraphs, and precede the query rows as the docs do; the
BEIR variant (heads ranked by nDCG@10 of their doc ranking) is not reproduced, the LME score is; a document of a
single token has no standard deviation (theirs: NaN, which drops the token and scores 0) and is kept whole; the null
item replaces only the item's query span (the panel's name or label: "What is in N/A?") where theirs
(``compose_scoring_prompt(self.null_query, docs)``) puts "N/A" in place of the whole query <q>, so here the
question's frame stays in both prompts and cancels in the calibration.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from helpers.engine.attention import Read, probe
from helpers.engine.inputs import build_batch
from helpers.engine.item import Item
from helpers.measures.methods.common import mean_score, need_items, need_regions

NULL_QUERY = "N/A"  # AttnBasedRetriever(null_query="N/A")


def null_item(item: Item, null_query: str = NULL_QUERY) -> Item:
    """The item with its query span replaced by ``null_query``."""
    start, end = item.query_span
    prompt = item.prompt[:start] + null_query + item.prompt[end:]
    return dataclasses.replace(item, prompt=prompt, query_span=(start, start + len(null_query)))


def doc_scores(calibrated: np.ndarray, docs: list[np.ndarray]) -> np.ndarray:
    """[L, H, D] doc scores from calibrated per-token scores [L, H, K] and each doc's token indices into K: tokens
    below the doc's mean - 2 std (unbiased, per head) dropped, the rest summed; a one-token doc kept whole."""
    calibrated = np.asarray(calibrated, dtype=np.float64)
    out = []
    for doc in docs:
        scores = calibrated[..., np.asarray(doc)]  # [L, H, n]
        if scores.shape[-1] < 2:
            out.append(scores.sum(-1))
            continue
        threshold = scores.mean(-1) - 2 * scores.std(-1, ddof=1)
        out.append(np.where(scores > threshold[..., None], scores, 0.0).sum(-1))
    return np.stack(out, -1)


def query_rows(batch, b: int) -> torch.Tensor:
    """Bool [T]: batch row b's prompt text and the chat suffix after it, through the last prompt token."""
    text = batch.prompt_text_mask[b].nonzero().flatten()
    rows = torch.zeros_like(batch.prompt_text_mask[b])
    rows[int(text.min()) : int(batch.last_prompt_index[b]) + 1] = True
    return rows


@torch.no_grad()
def qr_item(lm, item: Item, null_query: str = NULL_QUERY) -> np.ndarray:
    """[L, H, D] calibrated doc scores of one item, docs in the order of ``item.boxes``."""
    names = list(item.boxes)
    if len(names) < 2:
        raise ValueError(f"qrhead ranks documents and a {item.kind!r} item has one region; use strips or grids")
    pair = [item, null_item(item, null_query)]
    batch = build_batch(lm.processor, pair)
    image = batch.image_mask
    counts = image.sum(1)
    if counts[0] != counts[1]:
        raise RuntimeError("the item and its null item hold different numbers of image tokens")
    device = lm.model.device
    order = image.cumsum(1)  # j-th image token of each row has order j + 1
    groups = {f"image token {j}": (image & (order == j + 1)).to(device) for j in range(int(counts[0]))}
    rows = torch.stack([query_rows(batch, 0), query_rows(batch, 1)])
    with probe(lm, read=Read(query_rows=rows.to(device), groups=groups)) as rec:
        lm.model(**{k: v.to(device) for k, v in batch.inputs.items()})
    mass = rec.mass.double().cpu().numpy()  # [2, L, H, K]: mean over query rows
    calibrated = mass[0] - mass[1]
    image_positions = image[0].nonzero().flatten()
    docs = []
    for name in names:
        region = lm.adapter.region_mask(batch.inputs, item.boxes[name], item.image.size, 0)
        docs.append(np.nonzero(region[image_positions].numpy())[0])
    return doc_scores(calibrated, docs)


def qrhead_per_item(lm, items, null_query: str = NULL_QUERY) -> dict[str, np.ndarray]:
    """{"score": [N, L, H]}: each item's calibrated doc score of its gold (asked-about) region."""
    items = need_items(items, "qrhead")
    need_regions(lm, "qrhead")
    per_item = []
    for item in items:
        scores = qr_item(lm, item, null_query)
        per_item.append(scores[..., list(item.boxes).index(item.target)])
    return {"score": np.stack(per_item)}


def qrhead_score(lm, items, null_query: str = NULL_QUERY) -> np.ndarray:
    """QRScore [L, H]: the mean over items of the gold (asked-about) region's calibrated doc score."""
    return mean_score(qrhead_per_item(lm, items, null_query))
