"""Head-sets a user brings (07_protocol), in any form `read_any` picks by the file's form, as validated head-set
records (helpers.storage.headsets):

- a head-set file;
- a plain JSON list of `[layer, head]` pairs;
- a layers x heads score matrix (`.npy`, or `.csv` of L rows and H columns) with a `k`: its flat top-k;
- per-head scores keyed `"L-H"` or `"L.H"` (a JSON object, the form public visual-head repositories
  publish) with a `k`: the k best-scored heads.
"""

import json
import re
from pathlib import Path

import numpy as np

from helpers.measures.overlap import top_k
from helpers.storage.headsets import HeadSetError, from_mask, to_mask, validate_record

KEYED_HEAD = re.compile(r"^\s*(\d+)\s*[-.]\s*(\d+)\s*$")  # "12-5" or "12.5": layer, head


def from_pairs(pairs, path: Path, model: str, n_layers: int, n_heads: int) -> dict:
    """A plain list of [layer, head] pairs -> a validated head-set record for the model's L x H."""
    record = {"model": model, "setting": Path(path).stem, "selection": f"imported list ({Path(path).name})"}
    record.update(n_layers=n_layers, n_heads=n_heads, heads=pairs, k=len(pairs) if isinstance(pairs, list) else 0)
    validate_record(record, path, n_layers, n_heads)
    return record


def from_matrix(scores: np.ndarray, path: Path, model: str, k: int | None) -> dict:
    """A layers x heads score matrix -> its flat top-k as a head-set record (the matrix gives L x H)."""
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 2:
        raise HeadSetError(f"{path}: a score matrix must be layers x heads (2-D), got shape {scores.shape}")
    if np.isnan(scores).any():
        raise HeadSetError(f"{path}: the score matrix holds NaN; fix: give every head a score")
    k = _check_import_k(k, path, scores.size)
    return from_mask(top_k(scores, k), model, Path(path).stem, f"flat top-{k} of an imported score matrix", scores)


def from_keyed_scores(keyed: dict, path: Path, model: str, n_layers: int, n_heads: int, k: int | None) -> dict:
    """Per-head scores keyed "L-H" or "L.H" -> the k best-scored heads as a head-set record (heads not
    listed have no score and are never chosen)."""
    scores = np.full((n_layers, n_heads), -np.inf)
    for key, value in keyed.items():
        match = KEYED_HEAD.match(str(key))
        if match is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            raise HeadSetError(
                f"{path}: entry {key!r}: {value!r} is not a per-head score; fix: key every head as "
                '"layer-head" or "layer.head" with a number, e.g. {"12-5": 0.31}'
            )
        layer, head = int(match[1]), int(match[2])
        if layer >= n_layers or head >= n_heads:
            raise HeadSetError(
                f"{path}: entry {key!r} is out of range for {n_layers} layers x {n_heads} heads; "
                "fix: use the scores of this model"
            )
        scores[layer, head] = float(value)
    k = _check_import_k(k, path, len(keyed))
    return from_mask(top_k(scores, k), model, Path(path).stem, f"top-{k} of imported per-head scores", scores)


def _check_import_k(k, path: Path, available: int) -> int:
    if k is None:
        raise HeadSetError(f"{path}: scores need a k (how many heads to take); fix: pass k (--k N)")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= available:
        raise HeadSetError(f"{path}: k = {k!r} is not an int in 1..{available} (the scored heads); fix: pass such a k")
    return k


def read_any(path: Path, model: str, n_layers: int, n_heads: int, k: int | None = None) -> dict:
    """Any supported head-set form -> a validated record with its `mask` [L, H]: a head-set file, a JSON
    list of [layer, head], per-head scores keyed "L-H" / "L.H" (JSON), or a score matrix (.npy / .csv).
    `k` is needed for scores; `model`, `n_layers`, `n_heads` describe the model in use."""
    path = Path(path)
    if not path.is_file():
        raise HeadSetError(f"{path}: no such file; fix: give the path of a head-set file or a discovery setting name")
    if path.suffix == ".npy":
        record = from_matrix(np.load(path, allow_pickle=False), path, model, k)
    elif path.suffix == ".csv":
        record = from_matrix(np.loadtxt(path, delimiter=",", ndmin=2), path, model, k)
    else:
        try:
            raw = json.loads(path.read_text())
        except json.JSONDecodeError as error:
            raise HeadSetError(f"{path}: not valid JSON ({error}); fix: write the file as JSON") from None
        if isinstance(raw, list):
            record = from_pairs(raw, path, model, n_layers, n_heads)
        elif isinstance(raw, dict) and "heads" not in raw and raw and all(KEYED_HEAD.match(str(key)) for key in raw):
            record = from_keyed_scores(raw, path, model, n_layers, n_heads, k)
        else:
            record = raw
    validate_record(record, path, n_layers, n_heads)
    record.setdefault("setting", path.stem)
    record["mask"] = to_mask(record["heads"], record["n_layers"], record["n_heads"])
    return record
