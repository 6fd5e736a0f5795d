"""Figures and tables: the writers (``save_figure``, ``save_table``, ``show``) and one plotting module per
notebook (``design``, ``stimuli``, ``discovery``, ``overlap``, ``causal``, ``controls``). Plotting functions
take computed tables and return a matplotlib figure; they never compute."""

from helpers.figures.writers import save_figure, save_table

__all__ = ["save_figure", "save_table"]
