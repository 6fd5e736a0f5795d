"""LFM2-VL: one picture, or tiles and the thumbnail, each its own grid (spatial_shapes)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.models.lfm2_vl.image_processing_lfm2_vl import find_closest_aspect_ratio

from helpers.engine.adapters.base import Adapter, View, adapter_sizes, softmax_layers
from helpers.engine.adapters.layout import one_image
from helpers.engine.adapters.tiles import run_images, tile_views


@dataclass
class Lfm2VlAdapter(Adapter):
    """LFM2-VL: each picture is a grid of patches (``spatial_shapes``, rows x cols of encoder patches) whose
    factor x factor blocks become one token each, row-major (Lfm2VlModel.get_image_features). A small image is
    one picture, resized (Lfm2VlImageProcessor.smart_resize); a large one is stretched onto cols x rows tiles
    (find_closest_aspect_ratio over min_tiles..max_tiles tiles) and split row-major, then the smart-resized whole
    image follows as the thumbnail (use_thumbnail). Lfm2VlProcessor._build_image_tokens wraps each image in
    <|image_start|> .. <|image_end|> and marks each tile and the thumbnail, so every picture is one run of image
    tokens (with use_image_special_tokens, its default: without it pictures cannot be told apart)."""

    factor: int = 2  # downsample_factor
    tile: int = 512  # tile_size
    min_tiles: int = 2
    max_tiles: int = 10
    thumbnail: bool = True  # use_thumbnail

    def _pictures(self, inputs, batch_index, image_index) -> list[tuple[torch.Tensor, tuple[int, int]]]:
        """Each picture of one image: positions [rows * cols] and its token grid (rows, cols)."""
        images = run_images(inputs["input_ids"], self.image_token_id, "end")
        runs = one_image(images, batch_index, image_index)
        grids = [(h // self.factor, w // self.factor) for h, w in inputs["spatial_shapes"].tolist()]  # per picture
        before = sum(len(image) for row in images[:batch_index] for image in row)  # pictures of the rows above
        before += sum(len(image) for image in images[batch_index][:image_index])
        pictures = list(zip(runs, grids[before : before + len(runs)]))
        if len(pictures) != len(runs) or any(run.numel() != r * c for run, (r, c) in pictures):
            raise ValueError(
                f"lfm2_vl image {image_index} of batch row {batch_index}: its runs of image tokens "
                f"({[run.numel() for run in runs]}) are not its pictures' token grids (spatial_shapes // "
                f"{self.factor}): process the images with use_image_special_tokens=True (Lfm2VlProcessor's default), "
                "which marks every tile and the thumbnail"
            )
        return pictures

    def image_token_grid(self, inputs, batch_index, image_index):
        pictures = self._pictures(inputs, batch_index, image_index)
        if len(pictures) > 1 and not self.thumbnail:
            raise ValueError("lfm2_vl with use_thumbnail=False: no picture shows the whole of a tiled image")
        return pictures[-1]

    def _tiles(self, width: int, height: int) -> tuple[int, int]:
        """(rows, cols) of tiles a large image is split into (Lfm2VlImageProcessor._get_grid_layout)."""
        low, high = self.min_tiles, self.max_tiles
        ratios = [(w, h) for n in range(low, high + 1) for w in range(1, n + 1) for h in range(1, n + 1)]
        ratios = sorted(set(r for r in ratios if low <= r[0] * r[1] <= high), key=lambda r: r[0] * r[1])
        cols, rows = find_closest_aspect_ratio(width / height, ratios, width, height, self.tile)
        return rows, cols

    def views(self, inputs, image_size, batch_index, image_index):
        pictures = self._pictures(inputs, batch_index, image_index)
        width, height = image_size
        if len(pictures) == 1:
            return [View("image", (0, 0, width, height), pictures[0][1], pictures[0][0])]
        rows, cols = self._tiles(width, height)
        if rows * cols + self.thumbnail != len(pictures):
            raise ValueError(
                f"lfm2_vl image {image_index} of batch row {batch_index} has {len(pictures)} pictures, but splitting "
                f"a {width}x{height} image onto {self.tile} px tiles ({self.min_tiles}..{self.max_tiles} tiles) gives "
                f"{rows}x{cols} tiles{' and the thumbnail' * self.thumbnail}: build the adapter with the processor "
                "that made the inputs (adapter_for(config, processor))"
            )
        tiles = tile_views(width, height, rows, cols, [(grid, run) for run, grid in pictures[: rows * cols]])
        if not self.thumbnail:
            return tiles
        (run, grid) = pictures[-1]
        return [*tiles, View("thumbnail", (0, 0, width, height), grid, run)]


def lfm2_vl_adapter(config, image_processor=None, processor=None) -> Adapter:
    shape = adapter_sizes(config.text_config)
    tiling = dict(tile=512, min_tiles=2, max_tiles=10, thumbnail=True)  # Lfm2VlImageProcessor's defaults
    if image_processor is not None:
        if image_processor.downsample_factor != config.downsample_factor:
            raise ValueError(
                f"lfm2_vl: the image processor downsamples by {image_processor.downsample_factor}, the model by "
                f"{config.downsample_factor}"
            )
        tiling = dict(
            tile=image_processor.tile_size,
            min_tiles=image_processor.min_tiles,
            max_tiles=image_processor.max_tiles,
            thumbnail=image_processor.use_thumbnail,
        )
    return Lfm2VlAdapter(
        family="lfm2_vl",
        candidate_layers=softmax_layers(config.text_config, shape["n_layers"]),
        image_token_id=config.image_token_id,
        factor=config.downsample_factor,
        **tiling,
        **shape,
    )
