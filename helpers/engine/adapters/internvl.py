"""InternVL and Aya Vision: tiles on the closest-aspect canvas, then the thumbnail."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.models.got_ocr2.image_processing_got_ocr2 import get_optimal_tiled_canvas

from helpers.engine.adapters.base import Adapter, View, adapter_sizes, softmax_layers
from helpers.engine.adapters.layout import one_image
from helpers.engine.adapters.square_grid import SquareGridAdapter
from helpers.engine.adapters.tiles import run_images, tile_views


@dataclass
class InternVLAdapter(SquareGridAdapter):
    """InternVL: each tile (``tile`` = (height, width) pixels, resized, not cropped) gives side x side tokens
    (pixel-shuffled patches), row-major.

    The InternVL processor's default dynamic tiling (crop_to_patches=True) resizes the image onto a canvas of
    cols x rows tiles, the grid of min_tiles..max_tiles tiles whose aspect is closest to the image's
    (transformers' get_optimal_tiled_canvas), and, unless the canvas is one tile, adds a thumbnail: the whole
    image resized onto one tile. The tiles' tokens come row-major, then the thumbnail's. With
    crop_to_patches=False an image is one tile.
    """

    tile: tuple[int, int] = (448, 448)
    min_tiles: int = 1
    max_tiles: int = 12

    def _tile_positions(self, inputs, batch_index, image_index) -> torch.Tensor:
        """Positions [n_tiles, side * side] of one image's tokens, tile by tile: its runs of image tokens (one for
        InternVL, one per tile for Aya Vision), each image's last run after the token before the row's last run."""
        runs = one_image(run_images(inputs["input_ids"], self.image_token_id, "last"), batch_index, image_index)
        span = torch.cat(runs)
        if span.numel() % self.side**2:
            raise ValueError(
                f"{self.family} image {image_index} of batch row {batch_index} has {span.numel()} image tokens, "
                f"not a whole number of tiles of {self.side**2}"
            )
        return span.view(-1, self.side**2)

    def image_token_grid(self, inputs, batch_index, image_index):
        return self._tile_positions(inputs, batch_index, image_index)[-1], (self.side, self.side)

    def views(self, inputs, image_size, batch_index, image_index):
        tiles = self._tile_positions(inputs, batch_index, image_index)  # [n_tiles, side^2]
        grid, (width, height) = (self.side, self.side), image_size
        if len(tiles) == 1:
            return [View("image", (0, 0, width, height), grid, tiles[0])]
        cols, rows = get_optimal_tiled_canvas((height, width), self.tile, self.min_tiles, self.max_tiles)
        if cols * rows + 1 != len(tiles):
            raise ValueError(
                f"{self.family} image {image_index} of batch row {batch_index} has {len(tiles)} tiles, but the "
                f"tiling of a {width}x{height} image onto {self.tile[1]}x{self.tile[0]} tiles "
                f"({self.min_tiles}..{self.max_tiles} tiles) gives {cols}x{rows} tiles and a thumbnail: build the "
                "adapter with the processor that made the inputs (adapter_for(config, processor)), with its "
                "min_patches and max_patches"
            )
        thumbnail = View("thumbnail", (0, 0, width, height), grid, tiles[-1])
        return [*tile_views(width, height, rows, cols, [(grid, t) for t in tiles[:-1]]), thumbnail]


@dataclass
class AyaVisionAdapter(InternVLAdapter):
    """Aya Vision: InternVL's tiling (GotOcr2ImageProcessor's crop_to_patches, which AyaVisionProcessor turns on):
    the tiles row-major, then the thumbnail (its "global" tile), each side x side pixel-shuffled tokens, row-major.
    AyaVisionProcessor.replace_image_token puts a TILE_<k> marker before each tile's run of image tokens and
    TILE_GLOBAL before the thumbnail's."""


def _tiling(image_processor, tile: tuple[int, int]) -> dict:
    """InternVL's tiling: the image processor's tile size and tile counts, else the config's tile and
    GotOcr2ImageProcessor's defaults (1..12 tiles)."""
    if image_processor is None:
        return dict(tile=tile, min_tiles=1, max_tiles=12)
    size = image_processor.size
    return dict(
        tile=(size.height, size.width), min_tiles=image_processor.min_patches, max_tiles=image_processor.max_patches
    )


def internvl_adapter(config, image_processor=None, processor=None) -> Adapter:
    shape = adapter_sizes(config.text_config)
    vision = config.vision_config
    if config.vision_feature_select_strategy != "default" or list(vision.image_size) != list(
        reversed(vision.image_size)
    ):
        raise ValueError(
            f"InternVL adapter supports square tiles with vision_feature_select_strategy='default', got "
            f"image_size={vision.image_size}, strategy={config.vision_feature_select_strategy!r}"
        )
    side = int(vision.image_size[0] // vision.patch_size[0] * config.downsample_ratio)
    return InternVLAdapter(
        family="internvl",
        candidate_layers=list(range(shape["n_layers"])),
        image_token_id=config.image_token_id,
        side=side,
        crop=False,
        **_tiling(image_processor, tuple(vision.image_size)),
        **shape,
    )


def aya_vision_adapter(config, image_processor=None, processor=None) -> Adapter:
    shape = adapter_sizes(config.text_config)
    vision = config.vision_config
    if config.vision_feature_select_strategy != "full":
        raise ValueError(
            "aya_vision adapter needs vision_feature_select_strategy='full' (SigLIP, one token per patch)"
        )
    return AyaVisionAdapter(
        family="aya_vision",
        candidate_layers=softmax_layers(config.text_config, shape["n_layers"]),
        image_token_id=config.image_token_id,
        side=vision.image_size // vision.patch_size // config.downsample_factor,
        crop=False,
        **_tiling(image_processor, (vision.image_size, vision.image_size)),
        **shape,
    )
