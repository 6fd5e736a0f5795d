"""Whole attention rows of chosen query rows, and each head's top-1 key: what the top-1-key discovery methods read.

Built on the probe's ``Read`` (helpers.engine.attention): every chosen key position is its own key group, so the
read's per-row mass to group j is the attention weight on key j, recomputed in fp32 from the layer's queries and
keys as the clean attention of that layer (the softmax over every key the row sees; restricting ``keys`` only picks
which weights come back, it renormalises nothing). One item per call (batch 1): a key group is a position, and
left padding would give the same position a different meaning in each batch row.

    rows = torch.zeros(T, dtype=torch.bool); rows[[T - 3, T - 1]] = True
    att = attention_rows(lm, inputs, rows)                 # every key the rows can see
    att.weights                                            # [L, H, R, K]
    positions = top_keys(lm, inputs, rows)                 # [L, H, R] absolute position of each head's top-1 key
    in_region = region[positions]                          # [L, H, R] bool: is the top-1 key in a key group

Ties go to the lowest key position (torch.argmax returns the first maximum).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from helpers.engine.attention import Read, probe


@dataclass
class AttentionRows:
    """The attention weights of chosen rows to chosen keys, for every candidate layer and head of one item."""

    weights: torch.Tensor  # [L, H, R, K] fp32
    row_positions: torch.Tensor  # [R] absolute positions of the rows, ascending
    keys: torch.Tensor  # [K] absolute positions of the keys, ascending


def _flat(selection: torch.Tensor, length: int, name: str) -> torch.Tensor:
    """A [T] or [1, T] bool selection -> [T] bool."""
    if not isinstance(selection, torch.Tensor) or selection.dtype != torch.bool:
        raise ValueError(f"{name} must be a bool tensor [T] or [1, T] over the item's positions")
    if selection.ndim == 2:
        if selection.shape[0] != 1:
            raise ValueError(f"{name} has batch size {selection.shape[0]}; these reads take one item (batch 1)")
        selection = selection[0]
    if selection.ndim != 1 or selection.shape[0] != length:
        raise ValueError(f"{name} has shape {tuple(selection.shape)}; the item has {length} positions")
    if not selection.any():
        raise ValueError(f"{name} selects no position")
    return selection.cpu()


@torch.no_grad()
def attention_rows(loaded, inputs: dict, query_rows: torch.Tensor, keys: torch.Tensor | None = None) -> AttentionRows:
    """The attention weights [L, H, R, K] of the chosen ``query_rows`` to the chosen ``keys`` of one item.

    ``inputs``: a one-item processor output (batch 1, T positions). ``query_rows``: bool [T] (or [1, T]). ``keys``:
    bool [T], or None for every real (non-pad) position up to the last chosen row. A chosen key after every chosen
    row is refused (ValueError), as the probe refuses a key no row sees (a pad) and a row that sees no key."""
    input_ids = inputs["input_ids"]
    if input_ids.shape[0] != 1:
        raise ValueError(f"attention_rows takes one item (batch 1), got batch {input_ids.shape[0]}")
    length = input_ids.shape[1]
    rows = _flat(query_rows, length, "query_rows")  # [T]
    if keys is None:
        real = inputs.get("attention_mask", torch.ones_like(input_ids))[0].bool().cpu()
        keys = real & (torch.arange(length) <= int(rows.nonzero().max()))
    keys = _flat(keys, length, "keys")
    key_positions = keys.nonzero().flatten()  # [K]
    last_row = int(rows.nonzero().max())
    if int(key_positions.max()) > last_row:
        late = key_positions[key_positions > last_row].tolist()
        raise ValueError(
            f"keys at positions {late} lie after every chosen row (the last is {last_row}): no row sees them"
        )
    device = loaded.model.device
    groups = {}
    for position in key_positions.tolist():
        one = torch.zeros(1, length, dtype=torch.bool)
        one[0, position] = True
        groups[f"key at position {position}"] = one.to(device)
    read = Read(query_rows=rows[None].to(device), groups=groups, per_row=True)
    with probe(loaded, read=read) as rec:
        loaded.model(**{k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()})
    weights = rec.mass_per_row[0].float()  # [L, H, R, K]
    return AttentionRows(weights=weights, row_positions=rec.row_positions[0].clone(), keys=key_positions)


def top_key_positions(att: AttentionRows) -> torch.Tensor:
    """[L, H, R] long: the absolute position of each head's top-1 key among ``att.keys`` at each row."""
    return att.keys[att.weights.argmax(-1)]


def top_keys(loaded, inputs: dict, query_rows: torch.Tensor, keys: torch.Tensor | None = None) -> torch.Tensor:
    """[L, H, R] long: each head's top-1 key position at each chosen row (rows ascending), among ``keys`` (None:
    every key the rows see). With a key group ``group`` bool [T], ``group[top_keys(...)]`` says whether the top-1
    key lies in it."""
    return top_key_positions(attention_rows(loaded, inputs, query_rows, keys))
