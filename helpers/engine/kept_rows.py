"""The last decoder layer at the kept rows only, when a forward keeps only its last rows' logits.

With ``logits_to_keep`` = k the output head reads only the last k rows of the last decoder layer's output, and
those rows depend on the layer's other rows only through its keys and values. So the last layer computes keys
and values at every row, and its queries, attention, output projection and MLP at the last k rows only; it
returns hidden states [B, k, D], which the final norm and the output head take as they are. On the toy's
8 layers this removes about a tenth of a copy's work (a 36-layer model: about 1/40).

Written for the layer layout of ``SUPPORTED`` (Qwen3-VL's text layers: RMSNorm'd queries and keys, rotary
embeddings from the family's ``apply_rotary_pos_emb``); other layers run whole. The attention goes through the
registered head-probe function, so reads, interventions and run_head_sets' continuation see the kept rows
as the last query rows of the step.
"""

import sys
from contextlib import contextmanager

from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

SUPPORTED = {"Qwen3VLTextDecoderLayer"}


def supports(layer) -> bool:
    return type(layer).__name__ in SUPPORTED


@contextmanager
def last_layer_at_kept_rows(text_model, keep: int):
    """Inside, the last decoder layer of ``text_model`` runs its kept rows only (see the module docstring); a
    forward with a key-value cache (generate) runs the whole layer."""
    layer = text_model.layers[-1]
    if keep < 1 or not supports(layer):
        yield
        return
    whole = layer.forward  # the class's method, or the compiled wrapper set on the instance
    own = "forward" in layer.__dict__

    def forward(hidden_states, *args, **kwargs):
        if kwargs.get("cache", kwargs.get("past_key_values")) is not None or args:
            return whole(hidden_states, *args, **kwargs)
        return kept_rows(layer, keep, hidden_states, **kwargs)

    layer.forward = forward
    try:
        yield
    finally:
        if own:
            layer.forward = whole
        else:
            del layer.forward


def kept_rows(layer, keep: int, hidden_states, position_embeddings, attention_mask=None, **kwargs):
    """The layer's output at its last ``keep`` rows: [B, keep, D] from hidden states [B, T, D]."""
    attn = layer.self_attn
    batch, length, _ = hidden_states.shape
    keep = min(keep, length)
    normed = layer.input_layernorm(hidden_states)  # [B, T, D]
    query = attn.q_proj(normed[:, -keep:]).view(batch, keep, -1, attn.head_dim)
    query = attn.q_norm(query).transpose(1, 2)  # [B, H, keep, hd]
    key = attn.k_norm(attn.k_proj(normed).view(batch, length, -1, attn.head_dim)).transpose(1, 2)  # [B, Hkv, T, hd]
    value = attn.v_proj(normed).view(batch, length, -1, attn.head_dim).transpose(1, 2)
    rotary = sys.modules[type(attn).__module__].apply_rotary_pos_emb
    cos, sin = position_embeddings  # [B | 1, T, hd]
    query = rotary(query, query, cos[:, -keep:], sin[:, -keep:])[0]
    key = rotary(key, key, cos, sin)[0]
    mask = None if attention_mask is None else attention_mask[:, :, -keep:]  # [B | 1, 1, keep, T]
    attention = ALL_ATTENTION_FUNCTIONS[attn.config._attn_implementation]
    kwargs = {name: given for name, given in kwargs.items() if name not in ("cache", "past_key_values")}
    output, _ = attention(attn, query, key, value, mask, dropout=0.0, scaling=attn.scaling, **kwargs)
    hidden = hidden_states[:, -keep:] + attn.o_proj(output.reshape(batch, keep, -1))  # [B, keep, D]
    return hidden + layer.mlp(layer.post_attention_layernorm(hidden))
