"""The image-token layout the families share: the grid cells an interval covers, each image's span of image tokens
in ``input_ids``, and one image's span and grid picked out by (batch row, image)."""

from __future__ import annotations

import math

import torch


def grid_cells(start: float, stop: float, n: int) -> range:
    """Grid cells [0, n) overlapped by the interval [start, stop) in cell units."""
    first = min(max(int(math.floor(start)), 0), n - 1)
    last = min(max(int(math.ceil(stop)), first + 1), n)
    return range(first, last)


def image_spans(input_ids: torch.Tensor, image_token_id: int, tokens_per_image: list[int]) -> list[list[torch.Tensor]]:
    """Split each batch row's image-token positions into images, in order; images are numbered across the batch."""
    spans, image = [], 0
    for row in input_ids:
        positions = (row == image_token_id).nonzero().flatten()
        row_spans, start = [], 0
        while start < positions.numel():
            if image >= len(tokens_per_image):
                raise ValueError("input_ids hold more image tokens than the image inputs describe")
            n = tokens_per_image[image]
            row_spans.append(positions[start : start + n])
            start, image = start + n, image + 1
        spans.append(row_spans)
    return spans


def one_image(spans, batch_index: int, image_index: int) -> torch.Tensor:
    """The entry of per-row, per-image ``spans`` for image ``image_index`` of batch row ``batch_index``; refuses
    indices out of range."""
    if not 0 <= batch_index < len(spans):
        raise ValueError(f"batch_index {batch_index} out of range: batch has {len(spans)} rows")
    if not 0 <= image_index < len(spans[batch_index]):
        raise ValueError(
            f"image_index {image_index} out of range: batch row {batch_index} has {len(spans[batch_index])} image(s)"
        )
    return spans[batch_index][image_index]


def image_grid(grids: list, spans, batch_index: int, image_index: int):
    """The entry of ``grids`` (one per image, numbered across the batch) for image ``image_index`` of batch row
    ``batch_index``."""
    return grids[sum(len(row) for row in spans[:batch_index]) + image_index]
