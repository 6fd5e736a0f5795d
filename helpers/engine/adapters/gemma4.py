"""Gemma 4: patches pooled k x k into soft tokens, each image's grid read from image_position_ids."""

from __future__ import annotations

from dataclasses import dataclass

from helpers.engine.adapters.base import Adapter, adapter_sizes
from helpers.engine.adapters.layout import image_grid, image_spans, one_image


@dataclass
class Gemma4Adapter(Adapter):
    """Gemma 4: the image is resized (aspect kept) to a grid of patches, pooled k x k into soft tokens, row-major.

    The grid of each image comes from ``image_position_ids`` [n_images, max_patches, 2] ((x, y) per patch,
    -1 for padding). Full-attention layers have their own head size (``global_head_dim``); ``head_dim``
    is the sliding-window layers'.
    """

    pooling: int = 3

    def repeat_text_input(self, name, value, n):
        if name == "per_layer_inputs":  # Gemma 4's per-layer embeddings
            return value.repeat(n, *[1] * (value.ndim - 1))
        return super().repeat_text_input(name, value, n)

    def image_token_grid(self, inputs, batch_index, image_index):
        grids = []
        for positions in inputs["image_position_ids"]:  # [max_patches, 2]
            real = positions[(positions >= 0).all(-1)]
            cols, rows = (real.amax(0) + 1).tolist()
            grids.append((rows // self.pooling, cols // self.pooling))
        spans = image_spans(inputs["input_ids"], self.image_token_id, [r * c for r, c in grids])
        return one_image(spans, batch_index, image_index), image_grid(grids, spans, batch_index, image_index)


def gemma4_adapter(config, image_processor=None, processor=None) -> Adapter:
    text = config.text_config
    shape = adapter_sizes(text)
    never = shape["n_layers"] if text.num_kv_shared_layers else 0
    return Gemma4Adapter(
        family="gemma4",
        candidate_layers=list(range(shape["n_layers"])),
        image_token_id=config.image_token_id,
        pooling=config.vision_config.pooling_kernel_size,
        min_split_layer=never,
        **shape,
    )
