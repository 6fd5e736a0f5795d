"""Writers for figures (png + pdf) and tables (csv + tex), each file written atomically (`helpers.storage.files`).
Notebooks call them through helpers/runner/report.py, which also shows each figure and table inline. The
matplotlib backend is left to the front end (inline in Jupyter and papermill; Agg, chosen by matplotlib
itself, where there is no display)."""

import re
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from helpers.measures.printed import TABLE_DIGITS
from helpers.storage.files import atomic_write

# Fixed metadata so that rerunning `make figures` rewrites byte-identical PDFs.
_PDF_METADATA = {"CreationDate": None, "Creator": "visual-heads companion", "Producer": None}
_PNG_METADATA = {"Software": None}


def save_figure(fig: plt.Figure, name: str, out_dir: Path) -> list[Path]:
    """Write `fig` as `<out_dir>/<name>.png` and `.pdf`; returns both paths and closes the figure."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    png, pdf = out_dir / f"{name}.png", out_dir / f"{name}.pdf"
    atomic_write(png, lambda tmp: fig.savefig(tmp, format="png", dpi=150, bbox_inches="tight", metadata=_PNG_METADATA))
    atomic_write(pdf, lambda tmp: fig.savefig(tmp, format="pdf", bbox_inches="tight", metadata=_PDF_METADATA))
    plt.close(fig)
    return [png, pdf]


def save_table(df: pd.DataFrame, name: str, out_dir: Path, float_format: str = f"%.{TABLE_DIGITS}f") -> list[Path]:
    """Write `df` as `<out_dir>/<name>.csv` and `.tex`; returns both paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    csv, tex = out_dir / f"{name}.csv", out_dir / f"{name}.tex"
    df = unsigned_zeros(df, float_format)
    atomic_write(csv, df.to_csv(index=False, float_format=float_format))
    atomic_write(tex, df.to_latex(index=False, float_format=float_format, na_rep="--"))
    return [csv, tex]


def unsigned_zeros(df: pd.DataFrame, float_format: str) -> pd.DataFrame:
    """Floats that print as zero at `float_format`'s precision ("%.3f") set to 0.0, so that a table never shows
    "-0.000" beside "0.000" for two values that are the same at the digits it prints."""
    match = re.fullmatch(r"%\.(\d+)f", float_format)
    if match is None:
        return df
    below = 0.5 * 10.0 ** -int(match.group(1))
    out = df.copy()
    for column in out.select_dtypes("float").columns:
        out.loc[out[column].abs() < below, column] = 0.0
    return out
