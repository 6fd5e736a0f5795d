"""LLaVA: a CLIP tower's square grid (centre crop or whole image) or a Pixtral tower's native resolution."""

from __future__ import annotations

from helpers.engine.adapters.base import Adapter, adapter_sizes
from helpers.engine.adapters.pixtral import PixtralAdapter
from helpers.engine.adapters.square_grid import SquareGridAdapter


def llava_adapter(config, image_processor=None, processor=None) -> Adapter:
    shape = adapter_sizes(config.text_config)
    vision = config.vision_config
    if vision.model_type == "pixtral":  # Pixtral's native resolution, one token per patch, row breaks
        if config.vision_feature_select_strategy != "full":
            raise ValueError("LLaVA with a Pixtral tower needs vision_feature_select_strategy='full' (no CLS token)")
        return PixtralAdapter(
            family="llava",
            candidate_layers=list(range(shape["n_layers"])),
            image_token_id=config.image_token_id,
            unit=vision.patch_size,
            **shape,
        )
    if config.vision_feature_select_strategy != "default":
        raise ValueError(
            f"LLaVA adapter supports vision_feature_select_strategy='default' (CLS dropped), "
            f"got {config.vision_feature_select_strategy!r}"
        )
    return SquareGridAdapter(
        family="llava",
        candidate_layers=list(range(shape["n_layers"])),
        image_token_id=config.image_token_id,
        side=vision.image_size // vision.patch_size,
        crop=bool(getattr(image_processor, "do_center_crop", True)),
        **shape,
    )
