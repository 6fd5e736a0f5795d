"""Figures and tables: the writers (``save_figure``: png + pdf, ``save_table``: csv + tex; notebooks call them
through helpers.runner.report, which also shows the result inline) and one plotting module per notebook or panel kind
(``design`` and ``stimuli`` for 00, ``discovery`` 01, ``overlap`` 02, ``causal`` 03-04, ``controls`` 05,
``cross_model`` 06, ``methods`` 08, ``explorer`` for the head-set explorer and 07). Plotting functions take computed
tables and return a matplotlib figure; they never compute."""

from helpers.figures.writers import save_figure, save_table

__all__ = ["save_figure", "save_table"]
