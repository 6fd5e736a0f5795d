"""The eager oracles of the engine's tests: eager attention written out by hand, with an intervention's bias
added to the chosen heads, rows and keys (``ORACLE``), or with each masking of helpers.engine.masking done the
way its repository does it (``MASKING_ORACLE``). One module, so that every test file registers and fills the same
oracles (a test module imported under two names would hold two bias tables). A test gives the oracle its
intervention inside ``biased(...)`` or ``masked(...)``, which assert on leaving that the oracle applied it at every
layer it was given: an oracle that silently ran as plain eager would compare an intervention against nothing."""

from contextlib import contextmanager

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import repeat_kv
from transformers.masking_utils import AttentionMaskInterface, eager_mask

ORACLE = "biased_eager_oracle"
oracle_bias = {}  # decoder layer -> (heads [B, H] bool, rows [B, q] bool, keys [B, k] bool, bias [B])
applied = set()  # the decoder layers whose attention ran through an oracle with its intervention since it was given


@contextmanager
def _given(table: dict, by_layer: dict):
    """``table`` holds ``by_layer`` inside; on leaving it is emptied, and every layer given must have applied."""
    table.clear()
    table.update(by_layer)
    applied.clear()
    try:
        yield
    finally:
        table.clear()
    missing = sorted(set(by_layer) - applied)
    assert not missing, (
        f"the oracle never applied its intervention at decoder layers {missing}: is tests/oracle.py imported "
        "under two names, or did the model not run the oracle's attention?"
    )


def biased(by_layer: dict):
    """Inside, ``biased_eager_oracle`` adds these biases: decoder layer -> (heads, rows, keys, bias)."""
    return _given(oracle_bias, by_layer)


def masked(by_layer: dict):
    """Inside, ``masking_eager_oracle`` masks so: decoder layer -> (masking, heads, rows, keys, factor)."""
    return _given(oracle_masking, by_layer)


def biased_eager_oracle(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """Eager attention written out, with the intervention's bias added by hand to the chosen heads only, on the
    chosen keys each row can see (a full forward without cache: query row q and key q are position q)."""
    key, value = repeat_kv(key, module.num_key_value_groups), repeat_kv(value, module.num_key_value_groups)
    scores = query @ key.transpose(2, 3) * scaling + attention_mask  # [B, H, q, k]
    if module.layer_idx in oracle_bias:
        applied.add(module.layer_idx)
        heads, rows, keys, bias = oracle_bias[module.layer_idx]
        q_len, k_len = scores.shape[2:]
        assert q_len == k_len, "the oracle runs full forwards only (compare generate with a teacher-forced forward)"
        visible = attention_mask[:, 0] > torch.finfo(attention_mask.dtype).min / 2  # [B, q, k]
        rows, keys = rows[:, :q_len], keys[:, :k_len]
        for b in range(scores.shape[0]):
            for h in heads[b].nonzero().flatten().tolist():
                for q in rows[b].nonzero().flatten().tolist():
                    chosen = keys[b] & visible[b, q]
                    scores[b, h, q, chosen] = scores[b, h, q, chosen] + bias[b]
    weights = scores.softmax(-1)
    return (weights @ value).transpose(1, 2).contiguous(), weights


AttentionInterface.register(ORACLE, biased_eager_oracle)
AttentionMaskInterface.register(ORACLE, eager_mask)


MASKING_ORACLE = "masking_eager_oracle"
oracle_masking = {}  # decoder layer -> (masking, heads [B, H] bool, rows [B, q] bool, keys [B, k] bool, factor [B])


def masking_eager_oracle(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """Eager attention written out, each masking of helpers.engine.masking done by hand the way its repository does
    it, on the chosen heads at the chosen rows that see a key (pad rows see none and are left alone, as in the
    engine): query zeroed before q k^T (query_zero), bias HIDE added to the chosen keys each row sees (hide), logits
    set to 0 after the mask (leaky_uniform), the chosen keys' softmax weights multiplied by the factor
    (rescale), the head's output zeroed (output_zero). A full forward without cache: row q and key q are position q."""
    key, value = repeat_kv(key, module.num_key_value_groups), repeat_kv(value, module.num_key_value_groups)
    visible = attention_mask[:, 0] > torch.finfo(attention_mask.dtype).min / 2  # [B, q, k]
    chosen, masking = [], None
    if module.layer_idx in oracle_masking:
        applied.add(module.layer_idx)
        masking, heads, rows, keys, factor = oracle_masking[module.layer_idx]
        q_len, k_len = query.shape[2], key.shape[2]
        assert q_len == k_len, "the oracle runs full forwards only"
        rows, keys = rows[:, :q_len], keys[:, :k_len]
        chosen = [
            (b, h, q)
            for b in range(query.shape[0])
            for h in heads[b].nonzero().flatten().tolist()
            for q in rows[b].nonzero().flatten().tolist()
            if visible[b, q].any()
        ]
    query = query.clone()
    for b, h, q in chosen:
        if masking == "query_zero":
            query[b, h, q] = 0
    scores = query @ key.transpose(2, 3) * scaling + attention_mask  # [B, H, q, k]
    for b, h, q in chosen:
        if masking == "hide":
            scores[b, h, q, keys[b] & visible[b, q]] = float("-inf")
        elif masking == "leaky_uniform":
            scores[b, h, q] = 0
    weights = scores.softmax(-1)
    for b, h, q in chosen:
        if masking == "rescale":
            weights[b, h, q, keys[b]] *= factor[b]
    output = weights @ value  # [B, H, q, D]
    for b, h, q in chosen:
        if masking == "output_zero":
            output[b, h, q] = 0
    return output.transpose(1, 2).contiguous(), weights


AttentionInterface.register(MASKING_ORACLE, masking_eager_oracle)
AttentionMaskInterface.register(MASKING_ORACLE, eager_mask)
