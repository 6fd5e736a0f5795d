"""The field's published visual-head discovery methods, each re-implemented from its authors' code as a score over
heads [L, H] on the project's items (higher = more of the method's kind of head), with two causal references.

``METHODS``: name -> function(lm, items, **params) -> np.ndarray [L, H]. ``PER_ITEM``: name -> (per_item, combine):
``per_item(lm, items, **params)`` gives per-item arrays (item axis first; what the result cache keeps, see
helpers.measures.methods.cached) and ``combine(arrays)`` the [L, H] score, so that METHODS[name](lm, items) equals
combine(per_item(lm, items)). ``FACTS``: name -> ``MethodFacts``, what each method reads and how its authors
selected and validated heads; its ``needs`` is the one statement of each method's limits, and the refusals
(ValueError) follow from it; each module's docstring cites the repository, file and function it follows and states
every deviation. ``REGION_METHODS``: the methods that need the adapter to map pixel regions (or the image-token
grid) to tokens, refused on a family without that mapping before its model loads.
"""

from __future__ import annotations

from dataclasses import dataclass

from helpers.measures.methods.causal import (
    ablation_per_item,
    ablation_score,
    attribution_per_item,
    attribution_score,
    rank_agreement,
)
from helpers.measures.methods.common import mean_score
from helpers.measures.methods.gaze import gaze_per_item, gaze_score
from helpers.measures.methods.localization import localization_score, localization_votes
from helpers.measures.methods.qrhead import qrhead_per_item, qrhead_score
from helpers.measures.methods.top1_hits import (
    ocr_combine,
    ocr_per_item,
    ocr_score,
    retrieval_combine,
    retrieval_per_item,
    retrieval_score,
    sparsemm_combine,
    sparsemm_per_item,
    sparsemm_score,
)
from helpers.measures.methods.ver import ver_items, ver_score


@dataclass(frozen=True)
class MethodFacts:
    """What a method computes and what its authors did with it."""

    title: str
    source: str  # repository: file, function
    query_rows: str
    key_groups: str
    aggregation: str
    selection: str
    validation: str
    needs: str  # what data the method needs (the refusals follow from it)


METHODS = {
    "gaze": gaze_score,
    "ver": ver_score,
    "localization": localization_score,
    "sparsemm": sparsemm_score,
    "ocr": ocr_score,
    "retrieval": retrieval_score,
    "qrhead": qrhead_score,
    "ablation": ablation_score,
    "attribution": attribution_score,
}

PER_ITEM = {
    "gaze": (gaze_per_item, mean_score),
    "ver": (ver_items, mean_score),
    "localization": (localization_votes, mean_score),
    "sparsemm": (sparsemm_per_item, sparsemm_combine),
    "ocr": (ocr_per_item, ocr_combine),
    "retrieval": (retrieval_per_item, retrieval_combine),
    "qrhead": (qrhead_per_item, mean_score),
    "ablation": (ablation_per_item, mean_score),
    "attribution": (attribution_per_item, mean_score),
}

CAUSAL_REFERENCES = ("ablation", "attribution")  # references, not attention scores


def holm_family(method: str) -> str:
    """The methods whose rank p's one Holm adjustment covers (notebook 08): the published methods together (the
    question is whether each one's set beats random, one test per method), and the causal references apart (they
    are the yardstick the methods are read against, not claims under test, so they do not widen the methods'
    family)."""
    return "causal references" if method in CAUSAL_REFERENCES else "published methods"


REGION_METHODS = ("gaze", "ver", "localization", "sparsemm", "ocr", "qrhead")  # FACTS[name].needs: region mapping


def check_method(name: str) -> str:
    """`name` when it is one of METHODS, else a ValueError naming the allowed ones."""
    if name not in METHODS:
        raise ValueError(f"method {name!r} is not one of the methods: {', '.join(METHODS)}")
    return name


def citation(name: str) -> str:
    """What a head-set file records of where a method comes from: its title and its source (FACTS)."""
    facts = FACTS[check_method(name)]
    return f"{facts.title}; {facts.source}"


FACTS = {
    "gaze": MethodFacts(
        title="Gaze heads",
        source="rohitgandikota/gaze-heads: 01_discover_gaze_heads.py main; gaze_heads/gaze.py "
        "collect_last_query_attentions, aggregate_region_attention",
        query_rows="the last prompt token (prompt-only forward)",
        key_groups="each panel's image tokens (raw mass, not renormalised)",
        aggregation="each strip asked about every panel; diagonal (queried = attended panel) mean over panels, strips",
        selection="top 100 heads by score",
        validation="steering: a pre-softmax bias on the top-100 heads' attention to a target panel redirects VQA and "
        "narration (judged by Claude), against random non-gaze heads and all heads",
        needs="multi-panel strip items (regions named 'panel k'); an adapter that maps regions to tokens",
    ),
    "ver": MethodFacts(
        title="Visual evidence retrieval (VER) heads",
        source="Prongcan/VERA: vera/analysis/full_analysis.py process_single_folder, run_full_analysis; "
        "vera/models/qwen.py capture_attention",
        query_rows="the last prompt token (predicts the first answer token)",
        key_groups="evidence-region tokens / all image tokens",
        aggregation="evidence share of the image attention (+1e-9), mean over items",
        selection="global top 5 heads by mean score",
        validation="masking the heads (o_proj columns zeroed) degrades long-document QA; verbalised evidence helps",
        needs="items whose evidence region is part of the image (strips, grids); region mapping",
    ),
    "localization": MethodFacts(
        title="Localization heads",
        source="seilk/LocalizationHeads: localization_heads_finder.py LocalizationHeadsFinder.collect_attention, "
        "vis_attn_summation, find_elbow_point, spatial_entropy, analyze_attention_file",
        query_rows="the last prompt token (prefill)",
        key_groups="every image token, laid out on the image-token grid",
        aggregation="per item: heads above the chord elbow of the image-attention sum (value-based; their code "
        "selects by head index, a bug), ranked by spatial entropy; score = frequency among the 10 lowest-entropy "
        "heads over items",
        selection="the few most frequent heads (the paper uses 3)",
        validation="training-free visual grounding (REC/RES accuracy on RefCOCO/+/g) from the heads' combined maps",
        needs="an image of at least 2 tokens and an adapter with an image-token grid; no region or answer needed",
    ),
    "sparsemm": MethodFacts(
        title="SparseMM visual heads",
        source="CR400AF-A/SparseMM: visual_head/qwen_visual_head.py decode, hit_score; sparsemm/sparsemm_utils.py",
        query_rows="the row that predicts each generated token (greedy decoding)",
        key_groups="top-1 key over all keys, tested against the image tokens of the one region whose text contains "
        "the token",
        aggregation="sum of 1/|region| over hit steps per item, mean over items",
        selection="no top-k: scores set per-head KV-cache budgets; the paper also masks the top heads",
        validation="KV-cache compression keeps accuracy; masking visual heads drops OCR/VQA accuracy",
        needs="answers that read out a region's content text (labels), regions with texts; region mapping",
    ),
    "ocr": MethodFacts(
        title="OCR heads",
        source="baekingeol/OCR_Head: step2_ocr_retrieval_head.py main; utils/utils.py return_attention, "
        "return_weights; utils/metrics.py compute_score; step3_extracted_heads.py",
        query_rows="each generated token's own row, for tokens whose id is in the gold answer",
        key_groups="argmax over the prompt keys, tested against the evidence region's image tokens",
        aggregation="hit: the answer's LCS recall, miss: 0; mean over all (item, token) entries",
        selection="heads with mean >= 0.1 (step 3)",
        validation="masking OCR heads (DocVQA accuracy), CoT on heads, sink-value redistribution",
        needs="generated answers sharing tokens with the gold answer; an evidence region; region mapping",
    ),
    "retrieval": MethodFacts(
        title="Retrieval heads (copy-paste score)",
        source="nightdessert/Retrieval_Head: retrieval_head_detection.py LLMNeedleHaystackTester.retrieval_calculate, "
        "decode, evaluate_and_log",
        query_rows="the row that predicts each generated token (greedy decoding)",
        key_groups="top-1 key over all keys, in the source span (needle) and holding the generated token",
        aggregation="sum of 1/|span| over copy steps per item, mean over items answered with ROUGE-1 recall > 0.5",
        selection="heads with score > 0.1",
        validation="masking retrieval heads (query zeroed) breaks needle-in-a-haystack retrieval",
        needs="answers copied from the prompt's source span (here the query span); text only, blind to image reads",
    ),
    "qrhead": MethodFacts(
        title="Query-focused retrieval heads (QRHead)",
        source="princeton-pli/QRHead: src/qrretriever/attn_retriever.py score_docs_per_head_for_detection, "
        "score_per_token_attention_to_query; exp_scripts/detection/detect_qrhead_lme.py lme_eval",
        query_rows="the query span (prompt text and chat suffix), attention averaged over its rows",
        key_groups="each document's tokens (here each region's image tokens), minus the same with a null query 'N/A' "
        "(theirs in place of the whole query; here in place of the query span only)",
        aggregation="per doc: tokens below mean - 2 std dropped, sum; gold doc's score, mean over items",
        selection="top 16 heads",
        validation="retrieval (LongMemEval, CLIPPER recall; BEIR nDCG@10), long-context QA with the heads' retriever",
        needs="items with several regions (documents) and a query span; region mapping",
    ),
    "ablation": MethodFacts(
        title="Single-head ablation (causal reference)",
        source="this project: helpers/engine/head_zeroing.py zero_head_outputs",
        query_rows="every position (the head's output zeroed everywhere)",
        key_groups="none",
        aggregation="drop in P(correct), mean over items",
        selection="reference ranking",
        validation="exact by construction",
        needs="a correct answer (MCQ letter or gold answer text); an o_proj per layer",
    ),
    "attribution": MethodFacts(
        title="Attribution patching (causal reference)",
        source="this project: helpers/engine/head_grads.py head_attributions",
        query_rows="every position",
        key_groups="none",
        aggregation="sum over positions of dP/d(head output) . (head output), mean over items",
        selection="reference ranking",
        validation="rank correlation with exact single-head ablation (rank_agreement)",
        needs="as ablation; a differentiable forward",
    ),
}

__all__ = [
    "CAUSAL_REFERENCES",
    "FACTS",
    "METHODS",
    "PER_ITEM",
    "REGION_METHODS",
    "MethodFacts",
    "check_method",
    "citation",
    "rank_agreement",
]
