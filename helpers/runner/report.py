"""Show a result in the notebook and save it in the same call: tables beside the paper's values, figures inline.

    table3 = report.table(table3, "table03_cers", P.out_dir, reference="table03_cers", on="setting")
    report.figure(fig, "fig03_cers", P.out_dir)

``table`` merges the run's table with the paper's published values (``paper_figures/reference/<name>.csv``,
columns named ``paper_*``), displays the merged table rounded, and writes it as .csv + .tex; ``figure``
displays the figure (a PNG in the notebook's output) and writes it as .png + .pdf.
"""

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import display

from helpers.figures.writers import save_figure, save_table, unsigned_zeros
from helpers.storage.reference import reference


def table(
    df: pd.DataFrame,
    name: str,
    out_dir: Path,
    reference_name: str | None = None,
    on: str | list[str] = "setting",
    columns: list[str] | None = None,
    float_format: str = "%.3f",
    digits: int = 3,
) -> pd.DataFrame:
    """Merge `df` with the reference table `reference_name` on `on` (only `columns` of it when given),
    display it rounded to `digits`, save it as `<out_dir>/<name>.csv` + `.tex`; returns the merged table."""
    if reference_name is not None:
        paper = reference(reference_name)
        if columns is not None:
            paper = paper[[*([on] if isinstance(on, str) else on), *columns]]
        df = df.merge(paper, on=on, how="left")
    display(unsigned_zeros(df, f"%.{digits}f").round(digits))
    save_table(df, name, out_dir, float_format=float_format)
    return df


def figure(fig: plt.Figure, name: str, out_dir: Path) -> None:
    """Show `fig` in the notebook and save it as `<out_dir>/<name>.png` + `.pdf` (then close it)."""
    display(fig)
    save_figure(fig, name, out_dir)
