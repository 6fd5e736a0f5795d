"""Idefics3 and SmolVLM (image splitting): tiles of a rounded-up canvas, then the global image."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from transformers.models.idefics3.image_processing_idefics3 import (
    MAX_IMAGE_SIZE,
    _resize_output_size_rescale_to_max_len,
    _resize_output_size_scale_below_upper_bound,
)

from helpers.engine.adapters.base import Adapter, View, adapter_sizes
from helpers.engine.adapters.layout import one_image
from helpers.engine.adapters.tiles import run_images, tile_views


@dataclass
class SplitImageAdapter(Adapter):
    """Idefics3 and SmolVLM (image splitting): the processor resizes the image (longest edge to ``longest_edge``,
    aspect kept) then stretches it onto a canvas of rows x cols squares of ``tile`` pixels (each edge rounded up to
    whole tiles) and splits it, row-major, adding the whole image resized onto one tile (the global image) last;
    an image of one tile is that tile only. Each tile gives side x side tokens (pixel-shuffled patches), row-major,
    one run of image tokens per tile between marker tokens; the global image's run follows the <global-img> token.
    With do_image_splitting=False every image is the global image only.
    """

    side: int = 13  # tokens per tile edge
    tile: int = 364  # pixels per tile edge (max_image_size)
    longest_edge: int = 1456  # the first resize (size["longest_edge"])
    splitting: bool = True

    def language_model(self, model):
        return model.model.text_model

    def _canvas(self, width: int, height: int) -> tuple[int, int]:
        """(rows, cols) of tiles the processor splits an image into; (0, 0): not split."""
        height, width = _resize_output_size_rescale_to_max_len(height, width, max_len=self.longest_edge)
        height, width = _resize_output_size_scale_below_upper_bound(height, width, max_len=MAX_IMAGE_SIZE)
        aspect = width / height  # resize_for_vision_encoder
        if width >= height:
            width = math.ceil(width / self.tile) * self.tile
            height = math.ceil(int(width / aspect) / self.tile) * self.tile
        else:
            height = math.ceil(height / self.tile) * self.tile
            width = math.ceil(int(height * aspect) / self.tile) * self.tile
        if not self.splitting or (height <= self.tile and width <= self.tile):
            return 0, 0
        return height // self.tile, width // self.tile

    def _tile_positions(self, inputs, batch_index, image_index) -> torch.Tensor:
        """Positions [n_tiles, side * side] of one image's tokens, tile by tile (the global image last): one run of
        image tokens per tile; an image ends with the run after the token that precedes each row's last run."""
        return torch.stack(
            one_image(run_images(inputs["input_ids"], self.image_token_id, "last"), batch_index, image_index)
        )

    def image_token_grid(self, inputs, batch_index, image_index):
        return self._tile_positions(inputs, batch_index, image_index)[-1], (self.side, self.side)

    def views(self, inputs, image_size, batch_index, image_index):
        tiles = self._tile_positions(inputs, batch_index, image_index)  # [n_tiles, side^2]
        width, height = image_size
        rows, cols = self._canvas(width, height)
        if len(tiles) != rows * cols + 1:
            raise ValueError(
                f"{self.family} image {image_index} of batch row {batch_index} has {len(tiles)} tiles, but splitting "
                f"a {width}x{height} image (longest edge {self.longest_edge}, tiles of {self.tile}) gives "
                f"{rows}x{cols} tiles and the global image: build the adapter with the processor that made the inputs"
            )
        grid = (self.side, self.side)
        views = tile_views(width, height, rows, cols, [(grid, t) for t in tiles[:-1]]) if rows else []
        return [*views, View("global image", (0, 0, width, height), grid, tiles[-1])]


def split_image_adapter(config, image_processor=None, processor=None) -> Adapter:
    shape = adapter_sizes(config.text_config)
    vision = config.vision_config
    tile, longest, splitting = vision.image_size, 4 * vision.image_size, True  # the image processors' defaults
    if image_processor is not None:
        tile, longest = image_processor.max_image_size["longest_edge"], image_processor.size.longest_edge
        splitting = image_processor.do_image_splitting
    if tile != vision.image_size:
        raise ValueError(f"{config.model_type}: tiles of {tile} px, but the vision tower takes {vision.image_size}")
    return SplitImageAdapter(
        family=config.model_type,
        candidate_layers=list(range(shape["n_layers"])),
        image_token_id=config.image_token_id,
        side=vision.image_size // vision.patch_size // config.scale_factor,
        tile=tile,
        longest_edge=longest,
        splitting=splitting,
        **shape,
    )
