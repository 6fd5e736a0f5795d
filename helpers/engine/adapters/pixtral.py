"""Pixtral's native resolution: Mistral 3 (and LLaVA with a Pixtral tower)."""

from __future__ import annotations

from dataclasses import dataclass

from helpers.engine.adapters.base import (
    Adapter,
    _image_grid,
    _image_spans,
    _image_token_id,
    _one_image,
    _softmax_layers,
    _text_shape,
)


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
        spans = _image_spans(inputs["input_ids"], self.image_token_id, [r * c for r, c in grids])
        return _one_image(spans, batch_index, image_index), _image_grid(grids, spans, batch_index, image_index)


def mistral3_adapter(config, image_processor=None, processor=None) -> Adapter:
    shape = _text_shape(config.text_config)
    return PixtralAdapter(
        family="mistral3",
        candidate_layers=_softmax_layers(config.text_config, shape["n_layers"]),
        image_token_id=_image_token_id(config),
        unit=config.vision_config.patch_size * config.spatial_merge_size,
        **shape,
    )
