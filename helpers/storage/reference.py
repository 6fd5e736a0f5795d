"""The paper's published values, one table per file: paper_figures/reference/<name>.csv (hand-entered from the
paper's text)."""

import pandas as pd

from helpers.storage.paths import REFERENCE


def reference(name: str) -> pd.DataFrame:
    """The paper's published values of one table (hand-entered from the paper's text)."""
    path = REFERENCE / f"{name}.csv"
    if not path.exists():
        raise FileNotFoundError(
            f"no reference table {path}; available: {sorted(p.stem for p in REFERENCE.glob('*.csv'))}"
        )
    return pd.read_csv(path)
