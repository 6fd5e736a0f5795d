"""One square token grid per image (PaliGemma, LLaVA with a CLIP tower), the base of Gemma 3, InternVL and Ovis 2."""

from __future__ import annotations

from dataclasses import dataclass

from helpers.engine.adapters.base import Adapter, View, adapter_sizes, config_image_token_id, softmax_layers
from helpers.engine.adapters.layout import image_spans, one_image


@dataclass
class SquareGridAdapter(Adapter):
    """Gemma 3 (pooled grid), PaliGemma and LLaVA (patch grid): every image gives side x side tokens, row-major.

    ``crop``: the processor resizes the shorter edge then centre-crops to a square (LLaVA's CLIP
    processor); otherwise the image is resized onto the square (Gemma 3 without pan-and-scan).
    """

    side: int = 16
    crop: bool = False

    def image_token_grid(self, inputs, batch_index, image_index):
        n_images = int((inputs["input_ids"] == self.image_token_id).sum()) // (self.side**2)
        spans = image_spans(inputs["input_ids"], self.image_token_id, [self.side**2] * n_images)
        return one_image(spans, batch_index, image_index), (self.side, self.side)

    def views(self, inputs, image_size, batch_index, image_index):
        if not self.crop:
            return super().views(inputs, image_size, batch_index, image_index)
        width, height = image_size
        short = min(width, height)
        left, top = (width - short) / 2, (height - short) / 2  # the centre crop, in original pixels
        positions, grid = self.image_token_grid(inputs, batch_index, image_index)
        return [View("centre crop", (left, top, left + short, top + short), grid, positions)]


def paligemma_adapter(config, image_processor=None, processor=None) -> Adapter:
    shape = adapter_sizes(config.text_config)
    vision = config.vision_config
    if image_processor is not None and getattr(image_processor, "do_center_crop", False):
        raise ValueError("paligemma adapter maps the image resized onto the square, not centre crops (do_center_crop)")
    return SquareGridAdapter(
        family="paligemma",
        candidate_layers=softmax_layers(config.text_config, shape["n_layers"]),
        image_token_id=config_image_token_id(config),
        side=vision.image_size // vision.patch_size,
        crop=False,
        **shape,
    )
