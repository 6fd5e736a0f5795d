"""The layout shared by the families that tile an image: tile views over an image stretched onto a canvas, and
each image's runs of image tokens told apart by their marker tokens."""

from __future__ import annotations

import torch

from helpers.engine.adapters.base import View


def tile_views(width: float, height: float, n_rows: int, n_cols: int, tiles: list) -> list[View]:
    """The views of an image stretched onto n_rows x n_cols tiles (row-major), each tile's (grid, positions) given."""
    dx, dy = width / n_cols, height / n_rows  # a tile's share of the original image
    return [
        View(f"tile ({r}, {c})", (c * dx, r * dy, (c + 1) * dx, (r + 1) * dy), *tiles[r * n_cols + c])
        for r in range(n_rows)
        for c in range(n_cols)
    ]


def run_images(input_ids: torch.Tensor, image_token_id: int, marked: str) -> list[list[list[torch.Tensor]]]:
    """Per batch row, per image: its runs of image tokens (positions [n] each), in order. Images are told apart by
    the token next to a run, which must be the one next to the same run of the row's first or last image:
    ``marked`` "last": each image's last run follows the token before the row's last run (<global-img>, Aya's
    TILE_GLOBAL, InternVL's <img>); "first": each image's first run follows the token before the row's first run
    (Ovis 2's <IMG_START>); "end": each image's last run is followed by the token after the row's last run
    (LFM2-VL's <|image_end|>)."""
    images_per_row = []
    for row in input_ids:
        runs = [torch.arange(start, start + length) for start, length in _runs(row == image_token_id)]
        before = [int(row[run[0] - 1]) for run in runs]  # the token before each run
        after = [int(row[run[-1] + 1]) if run[-1] + 1 < len(row) else None for run in runs]
        images, current = [], []
        for k, run in enumerate(runs):
            if marked == "first" and current and before[k] == before[0]:
                images.append(current)
                current = []
            current.append(run)
            if (marked == "last" and before[k] == before[-1]) or (marked == "end" and after[k] == after[-1]):
                images.append(current)
                current = []
        images_per_row.append(images + [current] * bool(current))
    return images_per_row


def _runs(selected: torch.Tensor) -> list[tuple[int, int]]:
    """Maximal runs of True in a [T] bool tensor, as (start, length)."""
    positions = selected.nonzero().flatten().tolist()
    runs = []
    for p in positions:
        if runs and runs[-1][0] + runs[-1][1] == p:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((p, 1))
    return runs
