"""How an intervention masks a head: the engine's HIDE and four maskings of the visual-head repositories.

The choice can decide a verdict, so each is available by name (``MASKINGS``) through ``Intervention.masking``,
``run_head_sets`` and ``letter_probs_under``; the default stays "hide". For the (batch row, head) pairs of a
head-set, at the chosen query rows:

- "hide" (the engine's own, the paper's masking): ``bias`` added to the logits of the chosen keys (HIDE = -inf:
  the softmax renormalises over the other keys the row sees).
- "query_zero": the head's query set to 0, so its attention is uniform over every key the mask lets the row see.
- "output_zero": the head's attention output (its slice of the output projection's input) set to 0.
- "rescale": the head's softmax weights on the chosen keys multiplied by ``factor``, not renormalised.
- "leaky_uniform": the logits set to 0 after the mask was added: uniform over every position of the call,
  future ones included. A leak, reproduced on purpose; never a default.

"hide" and "rescale" act on ``Intervention.keys``; the others on every key, so they take no keys. Each masking
but "hide" is defined below as the new softmax weights [N, r, k] of N (batch row, head) pairs at r rows from
their clean ones (``weights``: softmax(q k^T s + mask), None for the maskings WITHOUT_QK), their ``mask``
[N, r, k] (0 where a row sees a key, the dtype's lowest value elsewhere), the chosen keys each row sees ``hit``
[N, r, k] and ``factor`` [N]. The engine applies them on both of its attention paths (helpers.engine.attention:
in place of the pairs' weights on the small path; recomputed in fp32 from them on the sdpa path). Rows the
intervention does not choose, rows a keyed masking's keys leave alone, and pad rows (which see no key) are left
as they are. The module imports no torch (a parameter check may name the maskings in a blink).
"""

MASKINGS = ("hide", "query_zero", "output_zero", "rescale", "leaky_uniform")
KEYED = ("hide", "rescale")  # the maskings that act on Intervention.keys
WITHOUT_QK = ("query_zero", "output_zero", "leaky_uniform")  # their weights do not depend on q k^T


def check_masking(masking: str) -> None:
    if masking not in MASKINGS:
        raise ValueError(f"masking {masking!r} is not one of {MASKINGS}")


def query_zero(weights, mask, hit, factor):
    """Weights [N, r, k] of a head whose query is 0: q k^T = 0, so softmax(mask), uniform over the keys the row sees.

    Source: nightdessert/Retrieval_Head, faiss_attn/source/modeling_llama.py, ``LlamaFlashAttention2.forward``
    (``query_states[:, h[1], :, :] = 0`` for each (layer, head) of ``block_list``, after the rotary embedding,
    before flash attention); the same in CR400AF-A/SparseMM, sparsemm/qwen_model.py ``qwen_flash_attn2_forward_Mask``
    (and ``llama_flash_attn2_forward_Mask`` in sparsemm/llama_model.py, for ``self.head_list``). Rows: SparseMM
    zeroes at every row (the prompt's forward and each generated token's; rows="all" is theirs); Retrieval_Head only
    at the last prompt row and the generated rows (needle_in_haystack_with_mask.py, ``evaluate_and_log``: the
    prompt but its last token runs without ``block_list``, then ``decode`` passes it from the last prompt token on;
    row group "last" is theirs on a one-token answer). Deviations: on the engine's sdpa path in fp32 (theirs: flash
    attention in the model's dtype). Retrieval_Head's eager ``forward_torch`` of the same file masks by
    "leaky_uniform" instead (logits set to 0 after the mask), but its output is used only to inspect attention
    when ``output_attentions`` is set; the flash path gives the output."""
    return mask.softmax(-1)


def output_zero(weights, mask, hit, factor):
    """Weights [N, r, k] all 0: the head's attention output, its slice of the output projection's input, is 0.

    The single-head (or any head-set) ablation. Source: Prongcan/VERA, vera/models/internal/modeling_qwen3_vl.py,
    ``Qwen3VLForConditionalGeneration.apply_head_mask`` (``o_proj.weight[:, h * head_dim:(h + 1) * head_dim] = 0``
    for each masked head, every row; it unpacks each pair as (head, layer), called from vera/models/qwen.py
    ``run`` with ``heads_positions``). Deviations: the head's true slice (VERA takes head_dim = hidden_size //
    num_attention_heads, which is not the head's width where the config sets head_dim otherwise, e.g. Qwen3-VL-4B:
    2560 // 32 = 80, head_dim 128); nothing is written into the weights (VERA never restores them, so heads masked
    by an earlier call stay masked); only at the chosen rows (rows="all" is theirs). VERA's other masker
    (vera/models/base.py ``AttentionMasker``) zeroes the attention weights a forward hook returns, after the output
    was computed: it changes no output and is not reproduced."""
    return mask.new_zeros(mask.shape)


def rescale(weights, mask, hit, factor):
    """Weights [N, r, k]: the clean weights, the chosen keys' multiplied by ``factor`` [N] (0: dropped), not
    renormalised (the row's weights sum to less than 1 for factor < 1).

    Source: TianyunYoung/Hallucination-Attribution, LLaVA/llava/model/language_model/modeling_llama.py,
    ``LlamaAttention.forward`` (``reweight_img``: ``attn_weights[:, head, :, img_slice] *= reweight_alpha`` after
    the softmax, before dropout and the value product; ``reweight_text`` the same for the text after the image).
    Deviations: the chosen keys are any selection (theirs: the one contiguous slice [img_start_pos, img_start_pos +
    img_length), or everything after it), only at the chosen rows (rows="all" is theirs), and in fp32 on the
    engine's sdpa path (theirs: the softmax in fp32, the product in the model's dtype)."""
    return weights * factor[:, None, None].expand_as(weights).where(hit, 1.0)


def uniform_over_all_positions_leaky(weights, mask, hit, factor):
    """Weights [N, r, k] all 1 / k: uniform over every key position of the call, the row's future (and pads)
    included. REPRODUCES A BUG on purpose: a row reads later tokens, which no causal masking allows (measure it
    with helpers.engine.leakage).

    Source: jing-bi/visual-head, llava/model/forward.py, ``maskout`` (``attention[:, heads_layer, :, :] = 0`` on the
    logits after ``attn_weights + attention_mask``, then the softmax), called by ``llama_attn_bforward``,
    ``mistralforward`` and ``phi_attn_bforward`` when the strategy name holds "maskout". In a prefill every row of
    the head averages all T positions; in a decode step with a cache there is no future, only pads. Deviations:
    only at the chosen rows (rows="all" is theirs); pad rows are not intervened at (theirs are), which differs only
    in left-padded batches, where a leaky row averages the pad rows' values."""
    return mask.new_full(mask.shape, 1 / mask.shape[-1])


WEIGHTS = {
    "query_zero": query_zero,
    "output_zero": output_zero,
    "rescale": rescale,
    "leaky_uniform": uniform_over_all_positions_leaky,
}
