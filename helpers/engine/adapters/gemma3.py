"""Gemma 3: one pooled square per picture, with pan-and-scan crops when the processor makes them."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from helpers.engine.adapters.base import Adapter, Region, View, adapter_sizes
from helpers.engine.adapters.square_grid import SquareGridAdapter

PAN_AND_SCAN = dict(  # Gemma3Processor's defaults (images_kwargs), which win over its image processor's attributes
    do_pan_and_scan=False,
    pan_and_scan_min_crop_size=256,
    pan_and_scan_max_num_crops=4,
    pan_and_scan_min_ratio_to_activate=1.2,
)


@dataclass
class Gemma3Adapter(SquareGridAdapter):
    """Gemma 3: every picture is resized onto one square (side x side pooled tokens, row-major).

    With pan-and-scan on (``do_pan_and_scan=True``), an image whose aspect ratio reaches ``min_ratio`` is also cut
    into 2..``max_crops`` crops side by side along its longer edge (none when a crop would be under ``min_crop``
    pixels): the image processor's ``pan_and_scan_batched``. Each crop is one more picture: the original's tokens
    come first, then the crops' in order, each run between its own start and end tokens. How many crops an
    image has depends on its size, which region_positions gets for the mapped image only, so with pan-and-scan on
    a batch row must hold one image. Pan-and-scan enabled only at call time (``processor(..., do_pan_and_scan=True)``)
    is invisible to the adapter: build it with the processor whose defaults do it.
    """

    pan_and_scan: tuple[int, int, float] | None = None  # (min_crop, max_crops, min_ratio) when on

    def crops(self, width: int, height: int) -> list[Region]:
        """The boxes of the crops pan-and-scan cuts from a width x height image, row-major (none when off)."""
        if self.pan_and_scan is None:
            return []
        min_crop, max_crops, min_ratio = self.pan_and_scan
        long, short = max(width, height), min(width, height)
        if long / short < min_ratio:
            return []
        n = min(max_crops, max(2, min(int(math.floor(long / min_crop)), int(math.floor(long / short + 0.5)))))
        n_w, n_h = (n, 1) if width >= height else (1, n)
        crop_w, crop_h = int(math.ceil(width / n_w)), int(math.ceil(height / n_h))
        if min(crop_w, crop_h) < min_crop:
            return []
        return [
            (x, y, min(x + crop_w, width), min(y + crop_h, height))
            for y in range(0, crop_h * n_h, crop_h)
            for x in range(0, crop_w * n_w, crop_w)
        ]

    def views(self, inputs, image_size, batch_index, image_index):
        if self.pan_and_scan is None:
            return super().views(inputs, image_size, batch_index, image_index)
        width, height = image_size
        crops = self.crops(width, height)
        pictures = self._pictures(inputs, batch_index)
        fix = (
            "map regions with one image per batch row, or process the images with do_pan_and_scan=False (the "
            "Gemma3Processor's default) and build the adapter with that processor"
        )
        if image_index != 0:
            raise ValueError(
                f"gemma3 with pan-and-scan (do_pan_and_scan=True): image {image_index} of batch row {batch_index} "
                "cannot be found, since the crops of the images before it depend on their sizes: " + fix
            )
        if len(pictures) != 1 + len(crops):
            raise ValueError(
                f"gemma3 with pan-and-scan (do_pan_and_scan=True): batch row {batch_index} holds {len(pictures)} "
                f"pictures, but a {width}x{height} image gives the original and {len(crops)} crop(s) (crops of at "
                f"least {self.pan_and_scan[0]} px, at most {self.pan_and_scan[1]}, from an aspect ratio of "
                f"{self.pan_and_scan[2]}): build the adapter with the processor and settings that made the inputs, "
                "or " + fix
            )
        grid = (self.side, self.side)
        original = View("original", (0, 0, width, height), grid, pictures[0])
        return [original, *(View(f"crop {i}", box, grid, pictures[1 + i]) for i, box in enumerate(crops))]

    def _pictures(self, inputs, batch_index: int) -> list[torch.Tensor]:
        """Positions [side * side] of each picture's tokens in one batch row, in order."""
        if not 0 <= batch_index < len(inputs["input_ids"]):
            raise ValueError(f"batch_index {batch_index} out of range: batch has {len(inputs['input_ids'])} rows")
        positions = (inputs["input_ids"][batch_index] == self.image_token_id).nonzero().flatten()
        if positions.numel() % self.side**2:
            raise ValueError(
                f"gemma3 batch row {batch_index} has {positions.numel()} image tokens, not a whole number of "
                f"pictures of {self.side**2}"
            )
        return list(positions.view(-1, self.side**2))

    def image_token_grid(self, inputs, batch_index, image_index):
        if self.pan_and_scan is None:
            return super().image_token_grid(inputs, batch_index, image_index)
        if image_index != 0:
            raise ValueError("gemma3 with pan-and-scan (do_pan_and_scan=True) finds image 0 of a batch row only")
        return self._pictures(inputs, batch_index)[0], (self.side, self.side)


def gemma3_adapter(config, image_processor=None, processor=None) -> Adapter:
    shape = adapter_sizes(config.text_config)
    side = int(round(math.sqrt(config.mm_tokens_per_image)))
    settings = _pan_and_scan_settings(image_processor, processor)
    return Gemma3Adapter(
        family="gemma3",
        candidate_layers=list(range(shape["n_layers"])),
        image_token_id=config.image_token_id,
        side=side,
        crop=False,
        pan_and_scan=tuple(list(settings.values())[1:]) if settings["do_pan_and_scan"] else None,
        **shape,
    )


def _pan_and_scan_settings(image_processor, processor) -> dict:
    """Gemma 3's pan-and-scan settings as the processor applies them: a processor's defaults (images_kwargs) win
    over its image processor's attributes (transformers' kwargs merge); a bare image processor's attributes
    count, None meaning Gemma3Processor's default."""
    settings = {key: getattr(image_processor, key, None) for key in PAN_AND_SCAN}
    if processor is not None and processor is not image_processor:
        settings.update({k: v for k, v in (getattr(processor, "images_kwargs", None) or {}).items() if k in settings})
    return {key: PAN_AND_SCAN[key] if value is None else value for key, value in settings.items()}
