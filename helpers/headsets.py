"""Head-sets as JSON files: which model, which setting, which heads (and their scores).

A file holds `{"model", "setting", "selection", "k", "n_layers", "n_heads", "heads": [[layer, head], ...],
"scores": [...]}`; heads are listed best first. Other notebooks and users load them by path.
"""
import json
from pathlib import Path

import numpy as np


def to_list(mask: np.ndarray, scores: np.ndarray) -> list[list[int]]:
    """Heads of a bool mask [L, H], best score first -> [[layer, head], ...]."""
    layers, heads = np.nonzero(mask)
    order = np.lexsort((layers * mask.shape[1] + heads, -scores[layers, heads]))
    return [[int(layers[i]), int(heads[i])] for i in order]


def to_mask(heads: list[list[int]], n_layers: int, n_heads: int) -> np.ndarray:
    """[[layer, head], ...] -> bool mask [L, H]; a head out of range raises naming it."""
    mask = np.zeros((n_layers, n_heads), dtype=bool)
    for layer, head in heads:
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ValueError(f"head [{layer}, {head}] is out of range for {n_layers} layers x {n_heads} heads")
        mask[layer, head] = True
    return mask


def save(path: Path, *, model: str, setting: str, selection: str, mask: np.ndarray, scores: np.ndarray) -> Path:
    """Write a head-set file; `selection` says how it was chosen ('flat top-k', 'top-k per layer')."""
    heads = to_list(mask, scores)
    record = {"model": model, "setting": setting, "selection": selection, "k": len(heads),
              "n_layers": int(mask.shape[0]), "n_heads": int(mask.shape[1]), "heads": heads,
              "scores": [round(float(scores[l, h]), 6) for l, h in heads]}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1))
    return path


def load(path: Path) -> dict:
    """A head-set file as a dict, with its bool `mask` [L, H] added."""
    record = json.loads(Path(path).read_text())
    missing = {"model", "setting", "heads", "n_layers", "n_heads"} - set(record)
    if missing:
        raise ValueError(f"{path} is not a head-set file: it lacks {sorted(missing)}")
    record["mask"] = to_mask(record["heads"], record["n_layers"], record["n_heads"])
    return record
