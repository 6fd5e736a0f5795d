"""Head-sets as JSON files: which model, which setting, which heads (and their scores).

A file holds `{"model", "setting", "selection", "k", "n_layers", "n_heads", "heads": [[layer, head], ...],
"scores": [...]}`; heads are listed best first. Other notebooks and users load them by path.
"""

import json
from pathlib import Path

import numpy as np
import pandas as pd

from helpers.files import atomic_write


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
    record = {
        "model": model,
        "setting": setting,
        "selection": selection,
        "k": len(heads),
        "n_layers": int(mask.shape[0]),
        "n_heads": int(mask.shape[1]),
        "heads": heads,
        "scores": [round(float(scores[l, h]), 6) for l, h in heads],
    }
    return atomic_write(Path(path), json.dumps(record, indent=1))


def load(path: Path) -> dict:
    """A head-set file as a dict, with its bool `mask` [L, H] added."""
    record = json.loads(Path(path).read_text())
    missing = {"model", "setting", "heads", "n_layers", "n_heads"} - set(record)
    if missing:
        raise ValueError(f"{path} is not a head-set file: it lacks {sorted(missing)}")
    record["mask"] = to_mask(record["heads"], record["n_layers"], record["n_heads"])
    return record


def load_settings(
    folder: Path, settings, model: str, n_layers: int, n_heads: int, suffix: str = ""
) -> dict[str, np.ndarray]:
    """The head-sets `<folder>/<setting><suffix>.json` of `settings` (suffix "": flat top-k,
    "_per_layer": top-k per layer) as bool masks [L, H], checked against the model in use (same name,
    same L x H); a missing file says to run 01_discovery first."""
    masks = {}
    for setting in settings:
        path = Path(folder) / f"{setting}{suffix}.json"
        if not path.exists():
            raise FileNotFoundError(
                f"no head-set file {path}: run notebook 01_discovery with the same model and "
                f"out_dir first (python -m helpers.run 01)"
            )
        record = load(path)
        if record["model"] != model or (record["n_layers"], record["n_heads"]) != (n_layers, n_heads):
            raise ValueError(
                f"{path} was discovered on {record['model']!r} ({record['n_layers']} x {record['n_heads']} "
                f"heads), not on {model!r} ({n_layers} x {n_heads}): rerun 01_discovery for this model"
            )
        masks[setting] = record["mask"]
    return masks


def save_scores(long: pd.DataFrame, path: Path) -> Path:
    """Write 01_discovery's long score table (setting, layer, head, score), the input of load_score_maps."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    long.to_csv(path, index=False, float_format="%.6f")
    return path


def load_score_maps(path: Path, settings, n_layers: int, n_heads: int) -> dict[str, np.ndarray]:
    """The mean discovery scores [L, H] of `settings` from 01_discovery's long table
    (`discovery_scores.csv`: setting, layer, head, score), checked to cover every head of L x H."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no score table {path}: run notebook 01_discovery with the same out_dir first")
    table = pd.read_csv(path)
    maps = {}
    for setting in settings:
        rows = table[table.setting == setting]
        if len(rows) != n_layers * n_heads or rows["layer"].max() >= n_layers or rows["head"].max() >= n_heads:
            raise ValueError(
                f"{path} holds {len(rows)} scores of {setting!r}, not one per head of {n_layers} x "
                f"{n_heads}: rerun 01_discovery for this model"
            )
        scores = np.full((n_layers, n_heads), np.nan)
        scores[rows["layer"].to_numpy(), rows["head"].to_numpy()] = rows["score"].to_numpy()
        maps[setting] = scores
    return maps
