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


def load(path: Path, shape: tuple[int, int] | None = None) -> dict:
    """A head-set file as a dict, with its bool `mask` [L, H] added. Every entry is checked (and, given
    `shape` = (layers, heads) of the model in use, the file's shape too); a bad one raises naming the
    file, the entry and the fix."""
    path = Path(path)
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ValueError(f"{path} is not a readable head-set JSON file ({error}); rerun 01_discovery") from error
    if not isinstance(record, dict):
        raise ValueError(f"{path} is not a head-set file: it holds a {type(record).__name__}, not an object")
    missing = {"model", "setting", "heads", "n_layers", "n_heads"} - set(record)
    if missing:
        raise ValueError(f"{path} is not a head-set file: it lacks {sorted(missing)}")
    n_layers, n_heads = record["n_layers"], record["n_heads"]
    if not (_is_index(n_layers) and _is_index(n_heads) and n_layers > 0 and n_heads > 0):
        raise ValueError(f"{path}: n_layers={n_layers!r}, n_heads={n_heads!r} must be positive integers")
    if shape is not None and (n_layers, n_heads) != tuple(shape):
        raise ValueError(
            f"{path} is for a model of {n_layers} layers x {n_heads} heads, the model in use has "
            f"{shape[0]} x {shape[1]}: rerun 01_discovery for this model"
        )
    heads = _checked_heads(path, record["heads"], n_layers, n_heads)
    if "k" in record and record["k"] != len(heads):
        raise ValueError(f"{path}: 'k' is {record['k']!r} but 'heads' lists {len(heads)} heads; make them agree")
    record["mask"] = to_mask(heads, n_layers, n_heads)
    return record


def _is_index(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _checked_heads(path: Path, heads, n_layers: int, n_heads: int) -> list[list[int]]:
    """The file's `heads` as [[layer, head], ...]: each a pair of integers in range, none repeated, not empty."""
    if not isinstance(heads, list) or not heads:
        raise ValueError(f"{path}: 'heads' must be a non-empty list of [layer, head] pairs, got {heads!r}")
    seen = set()
    for i, entry in enumerate(heads):
        if not (isinstance(entry, list) and len(entry) == 2 and all(map(_is_index, entry))):
            raise ValueError(
                f"{path}: heads[{i}] = {entry!r} is not a [layer, head] pair of integers (booleans and "
                "floats are refused); write it as e.g. [3, 7]"
            )
        layer, head = entry
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ValueError(
                f"{path}: heads[{i}] = {entry!r} is out of range: layers 0..{n_layers - 1}, heads 0..{n_heads - 1}"
            )
        if (layer, head) in seen:
            raise ValueError(f"{path}: heads[{i}] = {entry!r} is listed twice; remove the duplicate")
        seen.add((layer, head))
    return heads


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
    return atomic_write(Path(path), long.to_csv(index=False, float_format="%.6f"))


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
