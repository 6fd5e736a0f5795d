"""Qwen2-VL, Qwen2.5-VL, Qwen3-VL (and its MoE), Qwen3.5 and GLM-4V: packed patches on an image grid."""

from __future__ import annotations

from dataclasses import dataclass

from helpers.engine.adapters.base import Adapter, adapter_sizes
from helpers.engine.adapters.layout import image_grid, image_spans, one_image


@dataclass
class QwenVLAdapter(Adapter):
    """Qwen2-VL, Qwen2.5-VL, Qwen3-VL (and its MoE), Qwen3.5, GLM-4V: the processor resizes the image onto a patch
    grid (image_grid_thw, in patches); one token per spatial_merge_size^2 patches, row-major."""

    merge: int = 2

    def image_token_grid(self, inputs, batch_index, image_index):
        grids = inputs["image_grid_thw"].tolist()  # [n_images, 3] (t, h, w) in patches
        merged = [(t * h // self.merge, w // self.merge) for t, h, w in grids]
        spans = image_spans(inputs["input_ids"], self.image_token_id, [r * c for r, c in merged])
        return one_image(spans, batch_index, image_index), image_grid(merged, spans, batch_index, image_index)

    def check_pixels(self, inputs, n_tokens):
        """Packed pixels: one row per patch of every image, image_grid_thw's (t, h, w) patches each, and one image
        token per merge x merge patches (a slice of a packed batch keeps rows that no longer match its grid)."""
        grids = inputs.get("image_grid_thw")
        if grids is None:
            raise ValueError(f"{self.family}: pixel_values come without image_grid_thw")
        patches = int(grids.prod(-1).sum())
        rows = inputs["pixel_values"].shape[0]
        if rows != patches:
            raise ValueError(
                f"pixel_values holds {rows} patch rows but image_grid_thw {grids.tolist()} says {patches}: the pixel "
                "rows do not belong to this item (a slice of a packed batch?); pass an Item or a Batch of one item"
            )
        if n_tokens * self.merge**2 != patches:
            raise ValueError(
                f"input_ids hold {n_tokens} image tokens but image_grid_thw {grids.tolist()} gives "
                f"{patches // self.merge**2} ({patches} patches / {self.merge}^2): the inputs do not belong together"
            )

    def repeat_text_input(self, name, value, n):
        if name == "deepstack_visual_embeds":  # Qwen3-VL: [k, D] per deepstack layer
            return [v.repeat(n, 1) for v in value]  # -> [n k, D], batch-major
        return super().repeat_text_input(name, value, n)


def qwen_adapter(config, image_processor=None, processor=None) -> Adapter:
    text = config.text_config
    shape = adapter_sizes(text)
    layer_types = getattr(text, "layer_types", None) or ["full_attention"] * shape["n_layers"]
    candidates = [i for i, kind in enumerate(layer_types) if kind != "linear_attention"]
    deepstack = len(getattr(config.vision_config, "deepstack_visual_indexes", None) or [])
    return QwenVLAdapter(
        family=config.model_type,
        candidate_layers=candidates,
        image_token_id=config.image_token_id,
        merge=config.vision_config.spatial_merge_size,
        min_split_layer=deepstack,
        **shape,
    )
