"""Pixtral's native resolution: Mistral 3 (and LLaVA with a Pixtral tower)."""

from __future__ import annotations

from dataclasses import dataclass

from helpers.engine.adapters.base import Adapter, adapter_sizes, config_image_token_id, softmax_layers
from helpers.engine.adapters.layout import image_grid, image_spans, one_image


@dataclass
class PixtralAdapter(Adapter):
    """Mistral 3 (and LLaVA with a Pixtral tower): native resolution. The processor resizes the image (aspect kept,
    longest edge at most the processor's) onto whole cells of ``unit`` pixels (patch size x spatial merge) and
    gives ``image_sizes`` (height, width) of the resized image; the model merges each cell's patches into one
    token. The tokens come row-major, each row of image tokens followed by a row-break token ([IMG_BREAK]; the
    last row by [IMG_END]), which are not image tokens: the image tokens alone form the rows x cols grid.
    """

    unit: int = 28  # pixels per token edge: patch_size * spatial_merge_size

    def image_token_grid(self, inputs, batch_index, image_index):
        grids = [(h // self.unit, w // self.unit) for h, w in inputs["image_sizes"].tolist()]
        spans = image_spans(inputs["input_ids"], self.image_token_id, [r * c for r, c in grids])
        return one_image(spans, batch_index, image_index), image_grid(grids, spans, batch_index, image_index)


def mistral3_adapter(config, image_processor=None, processor=None) -> Adapter:
    shape = adapter_sizes(config.text_config)
    return PixtralAdapter(
        family="mistral3",
        candidate_layers=softmax_layers(config.text_config, shape["n_layers"]),
        image_token_id=config_image_token_id(config),
        unit=config.vision_config.patch_size * config.spatial_merge_size,
        **shape,
    )
