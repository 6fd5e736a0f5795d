"""Molmo 2: a low-res view and the high-res crops' grid, each pooled into tokens."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.models.molmo2.image_processing_molmo2 import compute_crop_geometry

from helpers.engine.adapters.base import Adapter, View, adapter_sizes
from helpers.engine.adapters.layout import image_grid, image_spans, one_image


@dataclass
class Molmo2Adapter(Adapter):
    """Molmo 2 (transformers' molmo2): two views of each image, each a patch grid pooled pool_h x pool_w into
    tokens, row-major. Molmo2ImageProcessor._image_batch_to_patches_and_grids makes the low-res view (the whole
    image resized onto one ``crop`` px square, build_resized_image) and the high-res view: the image stretched onto
    a canvas of tiling_h x tiling_w overlapping crops (compute_crop_geometry), whose patches are each taken once,
    from the crop where they lie outside the overlap margins (_build_overlapping_crops), so the high-res patches
    form one grid over the canvas. arange_for_pooling pads a grid whose edge is not a multiple of the pooling
    window with half the missing patches before, the rest after, so a token's window may hang over the image's
    edge. Molmo2Processor.replace_image_token writes the low-res tokens, then the high-res ones, each row followed
    by an <im_col> token (not an image token); ``image_grids`` gives each image's pooled grids
    [low_rows, low_cols, high_rows, high_cols]. Molmo2Adapter.forward pools each window by attention over its own
    patches only, so a token's features come from its window's pixels."""

    patch: int = 14  # patch_size
    crop: int = 378  # size["height"]: crop edge and low-res edge, pixels
    margins: tuple[int, int] = (4, 4)  # overlap_margins, patches
    max_crops: int = 8
    pooling: tuple[int, int] = (2, 2)  # pooling_size (pool_h, pool_w)

    def attending_both_ways(self, item):
        """The image tokens and their markers (<im_start>, <im_col>, <im_end>: mm_token_type_ids 1), all of a row's
        images one bidirectional block (Molmo2Model.forward's block_sequence_ids)."""
        if "mm_token_type_ids" not in item:  # the model's mask is causal
            return super().attending_both_ways(item)
        return (item["mm_token_type_ids"][0] == 1).nonzero().flatten()

    def _span(self, inputs, batch_index, image_index) -> tuple[torch.Tensor, list[int]]:
        grids = inputs["image_grids"].tolist()  # [n_images, 4]: low_rows, low_cols, high_rows, high_cols (tokens)
        spans = image_spans(inputs["input_ids"], self.image_token_id, [a * b + c * d for a, b, c, d in grids])
        return one_image(spans, batch_index, image_index), image_grid(grids, spans, batch_index, image_index)

    def image_token_grid(self, inputs, batch_index, image_index):
        span, (rows, cols, _, _) = self._span(inputs, batch_index, image_index)
        return span[: rows * cols], (rows, cols)

    def views(self, inputs, image_size, batch_index, image_index):
        span, grid = self._span(inputs, batch_index, image_index)
        width, height = image_size
        _, _, canvas_h, canvas_w = compute_crop_geometry(
            height, width, self.max_crops, list(self.margins), self.crop, self.patch
        )
        side = self.crop // self.patch
        low = self._pooled("low-res image", width, height, (side, side), span[: grid[0] * grid[1]])
        high = self._pooled(
            "high-res crops",
            width,
            height,
            (canvas_h // self.patch, canvas_w // self.patch),
            span[grid[0] * grid[1] :],
        )
        if [*low.grid, *high.grid] != grid:
            raise ValueError(
                f"molmo2 image {image_index} of batch row {batch_index}: image_grids says {grid}, but a "
                f"{width}x{height} image on {self.crop} px crops of {self.patch} px patches (margins {self.margins}, "
                f"at most {self.max_crops} crops, pooling {self.pooling}) gives {[*low.grid, *high.grid]}: build the "
                "adapter with the processor that made the inputs (adapter_for(config, processor))"
            )
        return [low, high]

    def _pooled(self, name: str, width: int, height: int, patches: tuple[int, int], positions) -> View:
        """The view of the image stretched onto a patches = (rows, cols) grid, pooled into tokens after padding."""
        (pool_h, pool_w), (patch_rows, patch_cols) = self.pooling, patches
        rows, cols = -(-patch_rows // pool_h), -(-patch_cols // pool_w)
        top, left = (rows * pool_h - patch_rows) // 2, (cols * pool_w - patch_cols) // 2  # padding patches before
        dy, dx = height / patch_rows, width / patch_cols  # original pixels per patch
        box = (-left * dx, -top * dy, (cols * pool_w - left) * dx, (rows * pool_h - top) * dy)
        return View(name, box, (rows, cols), positions)


def molmo2_adapter(config, image_processor=None, processor=None) -> Adapter:
    shape = adapter_sizes(config.text_config)
    vision = config.vision_config
    # without the image processor: the vision tower's crop and patch, Molmo2ImageProcessor's other defaults
    layout = dict(patch=vision.patch_size, crop=vision.image_size[0], margins=(4, 4), max_crops=8, pooling=(2, 2))
    if image_processor is not None:
        layout = dict(
            patch=image_processor.patch_size,
            crop=image_processor.size.height,
            margins=tuple(image_processor.overlap_margins),
            max_crops=image_processor.max_crops,
            pooling=tuple(image_processor.pooling_size),
        )
    if (layout["patch"], [layout["crop"]] * 2) != (vision.patch_size, list(vision.image_size)):
        raise ValueError(
            f"molmo2: {layout['crop']} px crops of {layout['patch']} px patches, but the vision tower takes "
            f"{vision.image_size} px of {vision.patch_size} px patches"
        )
    return Molmo2Adapter(
        family="molmo2",
        candidate_layers=list(range(shape["n_layers"])),
        image_token_id=config.image_token_id,
        **layout,
        **shape,
    )
