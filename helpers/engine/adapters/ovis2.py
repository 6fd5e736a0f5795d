"""Ovis 2: the thumbnail, then the tiles of the covering (or closest-aspect) grid."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.models.ovis2.image_processing_ovis2 import get_min_tile_covering_grid
from transformers.models.ovis2.image_processing_ovis2 import get_optimal_tiled_canvas as ovis2_tiled_canvas

from helpers.engine.adapters.base import Adapter, View, adapter_sizes
from helpers.engine.adapters.layout import one_image
from helpers.engine.adapters.square_grid import SquareGridAdapter
from helpers.engine.adapters.tiles import run_images, tile_views


@dataclass
class Ovis2Adapter(SquareGridAdapter):
    """Ovis 2: each picture (``tile`` pixels square) gives side x side tokens (patches grouped hidden_stride x
    hidden_stride, row-major), each a softmax over the visual vocabulary. With crop_to_patches on, the image
    processor (Ovis2ImageProcessor.crop_image_to_patches) stretches the image onto cols x rows tiles (the fewest
    tiles covering 90% of it, get_min_tile_covering_grid, or with use_covering_area_grid=False the closest aspect,
    get_optimal_tiled_canvas) and puts the thumbnail (the whole image on one tile) first; Ovis2Processor's
    replace_image_token opens each image with <IMG_START>, then the thumbnail's run, <IMG_GRID>, and the tiles'
    runs row-major between <IMG_COL> / <IMG_ROW>. An image on one tile is that tile only."""

    tile: int = 448
    min_tiles: int = 1
    max_tiles: int = 12
    covering: bool = True  # use_covering_area_grid

    def _tile_positions(self, inputs, batch_index, image_index) -> torch.Tensor:
        """Positions [n_pictures, side * side] of one image's tokens, the thumbnail first."""
        return torch.stack(
            one_image(run_images(inputs["input_ids"], self.image_token_id, "first"), batch_index, image_index)
        )

    def image_token_grid(self, inputs, batch_index, image_index):
        return self._tile_positions(inputs, batch_index, image_index)[0], (self.side, self.side)

    def views(self, inputs, image_size, batch_index, image_index):
        pictures = self._tile_positions(inputs, batch_index, image_index)  # [n_pictures, side^2]
        grid, (width, height) = (self.side, self.side), image_size
        if len(pictures) == 1:
            return [View("image", (0, 0, width, height), grid, pictures[0])]
        if self.covering:
            cols, rows = get_min_tile_covering_grid((height, width), self.tile, self.max_tiles)
        else:
            cols, rows = ovis2_tiled_canvas((height, width), (self.tile, self.tile), self.min_tiles, self.max_tiles)
        if cols * rows + 1 != len(pictures):
            raise ValueError(
                f"ovis2 image {image_index} of batch row {batch_index} has {len(pictures)} pictures, but tiling a "
                f"{width}x{height} image onto {self.tile} px tiles (at most {self.max_tiles}, covering grid "
                f"{self.covering}) gives a thumbnail and {cols}x{rows} tiles: build the adapter with the processor "
                "that made the inputs (adapter_for(config, processor))"
            )
        thumbnail = View("thumbnail", (0, 0, width, height), grid, pictures[0])
        return [thumbnail, *tile_views(width, height, rows, cols, [(grid, p) for p in pictures[1:]])]


def ovis2_adapter(config, image_processor=None, processor=None) -> Adapter:
    shape = adapter_sizes(config.text_config)
    vision = config.vision_config
    patches, stride = vision.image_size // vision.patch_size, vision.hidden_stride
    if patches % stride:
        raise ValueError(
            f"ovis2: {patches} patches per tile edge, not a multiple of hidden_stride {stride}; the vision tower pads "
            "the last token row and column with fewer patches, which the region mapping does not model"
        )
    tiling = dict(tile=vision.image_size, min_tiles=1, max_tiles=12, covering=True)  # Ovis2ImageProcessor's defaults
    if image_processor is not None:
        tiling = dict(
            tile=image_processor.size.height,
            min_tiles=image_processor.min_patches,
            max_tiles=image_processor.max_patches,
            covering=image_processor.use_covering_area_grid,
        )
    if tiling["tile"] != vision.image_size:
        raise ValueError(f"ovis2: tiles of {tiling['tile']} px, but the vision tower takes {vision.image_size}")
    return Ovis2Adapter(
        family="ovis2",
        candidate_layers=list(range(shape["n_layers"])),
        image_token_id=config.image_token_id,
        side=patches // stride,
        crop=False,
        **tiling,
        **shape,
    )
