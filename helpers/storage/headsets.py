"""Head-sets as JSON files: which model, which setting, which heads (and their scores).

A file holds `{"model", "setting", "selection", "k", "n_layers", "n_heads", "heads": [[layer, head], ...],
"scores": [...]}`; heads are listed best first. `load` reads the files 01_discovery writes (for 03-05);
the format is the JSON schema `headset.schema.json` beside this module (`setting` optional, the file's stem by
default), `validate_record` checks a record against it and against the model in use, and every error names the
file, the entry and the fix. Head-sets a user brings in other forms: helpers.measures.imported_head_sets.
"""

import json
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
from jsonschema import Draft202012Validator

from helpers.storage.files import atomic_write

SCHEMA_PATH = Path(__file__).with_name("headset.schema.json")


class HeadSetError(ValueError):
    """A head-set file that cannot be used: the message names the file, the entry and the fix."""


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


PROVENANCE = ("method", "citation", "parameters")  # optional fields of a method's head-set (the schema's)


def save(
    path: Path,
    *,
    model: str,
    setting: str,
    selection: str,
    mask: np.ndarray,
    scores: np.ndarray,
    provenance: dict | None = None,
) -> Path:
    """Write a head-set file; `selection` says how it was chosen ('flat top-k', 'top-k per layer'); `provenance`
    (a published method's head-set): its "method", "citation" and "parameters", checked against the schema."""
    record = from_mask(mask, model, setting, selection, scores)
    extra = sorted(set(provenance or {}) - set(PROVENANCE))
    if extra:
        raise ValueError(f"provenance fields {extra} are not among {PROVENANCE}")
    record.update(provenance or {})
    validate_record(record, Path(path))
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


def same_model(named: str, model: str) -> bool:
    """Whether the model a head-set file names is `model`: the same name, or one folder on this machine."""
    folders = [Path(name).expanduser() for name in (named, model)]
    return named == model or (folders[0].is_dir() and folders[0].resolve() == folders[1].resolve())


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


@cache
def schema() -> dict:
    """The JSON schema of a head-set file (helpers/storage/headset.schema.json)."""
    return json.loads(SCHEMA_PATH.read_text())


def _where(error) -> str:
    """'heads[3][0]' for a schema error's location in the file, 'the top level' at the root."""
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path).lstrip(".")
    return where or "the top level"


def _schema_fix(error) -> str:
    """What to change for one schema error."""
    if error.validator == "required":
        return "add the missing field (model, n_layers, n_heads, heads: [[layer, head], ...])"
    if list(error.absolute_path)[:1] == ["heads"]:
        return "list every head as [layer, head] with two integers >= 0, at least one head"
    return f"give {_where(error)} a value that matches the schema ({SCHEMA_PATH.name})"


def validate_record(record, path: Path, n_layers: int | None = None, n_heads: int | None = None) -> None:
    """Raise HeadSetError, naming `path`, the entry and the fix, unless `record` is a valid head-set:
    it matches the schema; its heads are integers (not booleans or floats), in range, without
    duplicates; `k`, when given, is the number of heads; and, when the model's `n_layers` x `n_heads`
    are given, it was made for that shape."""
    if not isinstance(record, dict):
        raise HeadSetError(
            f"{path}: a head-set file is a JSON object, not a {type(record).__name__}; fix: wrap the heads as "
            '{"model": ..., "n_layers": ..., "n_heads": ..., "heads": [[layer, head], ...]} or import it '
            "with helpers.measures.imported_head_sets.read_any"
        )
    errors = sorted(Draft202012Validator(schema()).iter_errors(record), key=lambda e: list(e.absolute_path))
    if errors:
        error = errors[0]
        if error.validator == "required":
            missing = sorted({"model", "n_layers", "n_heads", "heads"} - set(record))
            raise HeadSetError(f"{path} is not a head-set file: it lacks {missing}; fix: {_schema_fix(error)}")
        raise HeadSetError(f"{path}: {_where(error)}: {error.message}; fix: {_schema_fix(error)}")
    for i, pair in enumerate(record["heads"]):
        if any(type(v) is not int for v in pair):  # the schema takes 1.0 as an integer
            raise HeadSetError(f"{path}: heads[{i}] = {pair} is not two integers; fix: write it as [layer, head]")
    shape = record["n_layers"], record["n_heads"]
    for i, (layer, head) in enumerate(record["heads"]):
        if layer >= shape[0] or head >= shape[1]:
            raise HeadSetError(
                f"{path}: heads[{i}] = [{layer}, {head}] is out of range for {shape[0]} layers x {shape[1]} heads "
                f"(layers 0..{shape[0] - 1}, heads 0..{shape[1] - 1}); fix: correct the entry or n_layers / n_heads"
            )
    seen = {}
    for i, pair in enumerate(map(tuple, record["heads"])):
        if pair in seen:
            raise HeadSetError(
                f"{path}: heads[{i}] = {list(pair)} repeats heads[{seen[pair]}]; fix: list every head once"
            )
        seen[pair] = i
    if "k" in record and record["k"] != len(record["heads"]):
        raise HeadSetError(
            f"{path}: k = {record['k']} but the file lists {len(record['heads'])} heads; "
            f"fix: set k to {len(record['heads'])} or list k heads"
        )
    if "scores" in record and len(record["scores"]) != len(record["heads"]):
        raise HeadSetError(
            f"{path}: {len(record['scores'])} scores for {len(record['heads'])} heads; "
            "fix: give one score per head or drop scores"
        )
    if n_layers is not None and shape != (n_layers, n_heads):
        raise HeadSetError(
            f"{path}: made for {shape[0]} layers x {shape[1]} heads ({record['model']!r}), but the model in use has "
            f"{n_layers} x {n_heads}; fix: use a head-set of this model (rerun 01_discovery or import its scores)"
        )


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


# ------------------------------------------------------------------------------------------- importers


def from_mask(mask: np.ndarray, model: str, setting: str, selection: str, scores: np.ndarray | None = None) -> dict:
    """A head-set record (the schema's form) of a bool mask [L, H], best score first when scores [L, H] are given."""
    mask = np.asarray(mask, dtype=bool)
    heads = to_list(mask, np.zeros(mask.shape) if scores is None else np.asarray(scores, dtype=float))
    record = {
        "model": model,
        "setting": setting,
        "selection": selection,
        "k": len(heads),
        "n_layers": int(mask.shape[0]),
        "n_heads": int(mask.shape[1]),
        "heads": heads,
    }
    if scores is not None:
        record["scores"] = [round(float(scores[l, h]), 6) for l, h in heads]
    return record
