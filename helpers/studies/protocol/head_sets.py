"""The head-sets of a report card: files of any form helpers/measures/imported_head_sets.py reads, or discovery
setting names."""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from helpers.measures.imported_head_sets import read_any
from helpers.stimuli.design import SETTINGS


@dataclass
class HeadSet:
    name: str  # shown in every table; names its random streams (a setting's: those of 03-05)
    path: Path
    record: dict  # the validated head-set file (helpers/storage/headsets.py) with its mask

    @property
    def mask(self) -> np.ndarray:  # [L, H] bool
        return self.record["mask"]

    @property
    def k(self) -> int:
        return int(self.mask.sum())

    @property
    def setting(self) -> str | None:
        """The discovery setting the set came from, when it is one of the 12."""
        return self.record.get("setting") if self.record.get("setting") in SETTINGS else None


def resolve_head_sets(entries, data_dir: Path, model: str, n_layers: int, n_heads: int, k=None) -> list[HeadSet]:
    """Head-set files (any form read_any takes) or discovery setting names (read from
    `data_dir/headsets/`) -> HeadSets checked against the model's L x H."""
    out = []
    for entry in entries:
        path = Path(data_dir) / "headsets" / f"{entry}.json" if entry in SETTINGS else Path(entry)
        if entry in SETTINGS and not path.exists():
            raise FileNotFoundError(f"no head-set file {path} for setting {entry!r}: run 01_discovery first")
        record = read_any(path, model, n_layers, n_heads, k)
        setting = record.get("setting")
        name = setting if setting in SETTINGS and path.stem == setting else path.stem
        out.append(HeadSet(name=name, path=path, record=record))
    names = [h.name for h in out]
    if len(set(names)) != len(names):
        raise ValueError(f"head-sets {names} share a name; give each file its own name")
    return out
