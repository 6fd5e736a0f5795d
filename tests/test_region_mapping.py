"""Pixel region -> image tokens, checked against the model itself, family by family.

Each family's tiny random model gets a vision tower whose attention outputs are zeroed (``local_vision``), so an
image token's features depend on its own patches' pixels only. One region of a black image is painted white; the
image tokens whose features change (the vision-tower outputs the model places into the language model's input
embeddings) must be exactly the adapter's tokens of that region, and for a family that tiles, they must lie in
every view (tile, thumbnail, global image) that shows part of the region.

The processors resample with NEAREST, so that a resize moves no painted pixel into a neighbouring token's cell:
the changed tokens must lie among the adapter's tokens of the region. A token whose cell the region overlaps
by a sliver thinner than one resized pixel may keep its features (no painted pixel was sampled there), so the
changed tokens must include the adapter's tokens of the region shrunk on every side by the most original pixels
one resized pixel spans (the image's longer edge over the family's shortest view edge ``EDGE``, rounded up).
"""

import math
from functools import cache

import numpy as np
import pytest
import torch
from PIL import Image
from transformers import AutoModelForImageTextToText

from helpers.engine import adapter_for
from helpers.engine.adapters import ResampledView
from helpers.engine.loading import attn_implementation_for
from tests.tiny_models import REGION_CONFIGS, local_vision, tiny_processor

EDGE = {  # the shortest edge, in pixels, any view of an image is resized to (the thumbnail, the base image)
    "gemma3": 64,
    "gemma3_pan_and_scan": 64,  # the original and each crop
    "paligemma": 28,
    "mistral3": 28,  # native resolution: the shorter edge of SIZES' images, resized to longest edge 56
    "llava_pixtral": 21,  # native resolution, longest edge 28: the shorter edge of SIZES' images
    "internvl": 56,
    "llava_next": 28,
    "llava_onevision": 28,
    "llava_onevision_shrunk": 28,  # the base image; the tiles' grid shrunk by the model (anyres_max_1)
    "idefics3": 28,
    "smolvlm": 28,
    "aya_vision": 28,
    "ovis2": 28,
    "lfm2_vl": 28,  # tiles and the thumbnail's shorter edge
    "glm4v": 84,  # native resolution: the shorter edge of SIZES' images resized to whole 28 px cells
    "molmo2": 35,  # the low-res image; the high-res canvas is at least one crop
}
MAPPED = list(EDGE)
SIZES = [(200, 130), (90, 160), (56, 56)]  # (width, height): wide, tall, one tile
MORE_SIZES = {"gemma3_pan_and_scan": [(200, 60)]}  # three crops
CASES = [(family, size) for family in MAPPED for size in SIZES + MORE_SIZES.get(family, [])]
REGIONS = [(0.52, 0.31, 0.75, 0.62), (0.0, 0.0, 0.15, 0.2), (0.85, 0.77, 1.0, 1.0), (0.2, 0.4, 0.9, 0.6)]


@cache
def _model_and_processor(family: str):
    config = REGION_CONFIGS[family]()
    torch.manual_seed(0)
    model = AutoModelForImageTextToText.from_config(config, attn_implementation=attn_implementation_for(config))
    for name, weight in model.named_parameters():  # Gemma 3 initialises its image projection to zeros; Molmo 2's
        # pooling attention and gated projector, drawn at std 0.02, pass a painted patch on at about 1e-8
        if "projector" in name and weight.ndim == 2 and (not weight.any() or family == "molmo2"):
            torch.nn.init.normal_(weight, std=0.5)
    return local_vision(model.eval()), tiny_processor(family)


def _image(size: tuple[int, int], region=None) -> Image.Image:
    """A black image of ``size`` (width, height), ``region`` (pixels) painted white."""
    pixels = np.zeros((size[1], size[0], 3), np.uint8)
    if region is not None:
        x0, y0, x1, y1 = region
        pixels[y0:y1, x0:x1] = 255
    return Image.fromarray(pixels)


@torch.no_grad()
def _input_embeds(model, adapter, inputs: dict) -> torch.Tensor:
    """The language model's input embeddings [B, T, D]: text embeddings with the image features placed in."""
    seen = {}

    def keep(module, args, kwargs):
        seen["embeds"] = kwargs["inputs_embeds"]

    handle = adapter.language_model(model).register_forward_pre_hook(keep, with_kwargs=True)
    try:
        model.model(**inputs)
    finally:
        handle.remove()
    return seen["embeds"]


def _pixels(size, fractions) -> tuple[int, int, int, int]:
    width, height = size
    x0, y0, x1, y1 = fractions
    return round(x0 * width), round(y0 * height), round(x1 * width), round(y1 * height)


def _shrunk(region, margin: int, size: tuple[int, int]):
    """``region`` shrunk by ``margin`` pixels on each side inside the image (an edge on the image's stays)."""
    x0, y0, x1, y1 = region
    width, height = size
    return x0 and x0 + margin, y0 and y0 + margin, x1 - margin * (x1 < width), y1 - margin * (y1 < height)


@pytest.mark.parametrize(("family", "size"), CASES)
def test_region_tokens_are_the_tokens_whose_features_change(family, size):
    model, processor = _model_and_processor(family)
    adapter = adapter_for(model.config, processor)
    text = [f"a {processor.image_token} b"]
    blank = processor(text=text, images=[_image(size)], return_tensors="pt")
    reference = _input_embeds(model, adapter, blank)[0]  # [T, D]
    for fractions in REGIONS:
        region = _pixels(size, fractions)
        painted = processor(text=text, images=[_image(size, region)], return_tensors="pt")
        assert torch.equal(painted["input_ids"], blank["input_ids"])
        change = (_input_embeds(model, adapter, painted)[0] - reference).abs().amax(-1)  # [T]
        changed = set(change.gt(1e-4).nonzero().flatten().tolist())
        mapped = set(adapter.region_positions(painted, region, size).tolist())
        inner = _shrunk(region, math.ceil(max(size) / EDGE[family]), size)
        assert changed <= mapped, (region, sorted(changed - mapped))
        assert set(adapter.region_positions(painted, inner, size).tolist()) <= changed, region
        views = adapter.views(painted, size, 0, 0)
        covering = [view.name for view in views if view.positions_under(inner).numel()]
        touched = [view.name for view in views if changed & set(view.positions.tolist())]
        showing = [view.name for view in views if _overlap(view.box, inner)]  # a shrunk grid may drop a region
        assert set(covering) <= set(touched) and len(showing) >= min(len(views), 2), (covering, touched)


def _overlap(box, region) -> bool:
    return max(box[0], region[0]) < min(box[2], region[2]) and max(box[1], region[1]) < min(box[3], region[3])


@pytest.mark.parametrize("family", ["internvl", "idefics3", "aya_vision", "ovis2", "lfm2_vl"])
def test_two_images_in_a_row_are_told_apart(family):
    """A row holding a tiled image then another: each image's tokens are its own (the markers between runs)."""
    processor = tiny_processor(family)
    adapter = adapter_for(REGION_CONFIGS[family](), processor)
    sizes = [(200, 130), (90, 160)]
    text = [f"a {processor.image_token} b {processor.image_token} c"]
    inputs = processor(text=text, images=[[_image(size) for size in sizes]], return_tensors="pt")
    first, second = (adapter.region_positions(inputs, (0, 0, *size), size, 0, i) for i, size in enumerate(sizes))
    alone = processor(text=[f"a {processor.image_token} b"], images=[_image(sizes[0])], return_tensors="pt")
    assert first.numel() == int((alone["input_ids"] == adapter.image_token_id).sum()) and first.max() < second.min()
    assert first.numel() + second.numel() == int((inputs["input_ids"] == adapter.image_token_id).sum())


def test_onevision_anyres_max_shrinks_the_tiles_grid():
    """With anyres_max_1, the unpadded grid of a multi-tile canvas (more than 1.1^2 tiles' tokens) is shrunk by the
    model: the tiles' view is a bilinear resize of the unshrunk grid, whose tokens the painting test checks above."""
    processor = tiny_processor("llava_onevision_shrunk")
    adapter = adapter_for(REGION_CONFIGS["llava_onevision_shrunk"](), processor)
    for size in SIZES:
        inputs = processor(text=[f"a {processor.image_token} b"], images=[_image(size)], return_tensors="pt")
        tiles = adapter.views(inputs, size, 0, 0)[1]
        assert isinstance(tiles, ResampledView) and tiles.grid[0] * tiles.grid[1] < tiles.source[0] * tiles.source[1]
        assert tiles.grid[0] * tiles.grid[1] <= 16 * 1.1**2


def test_layouts_the_mapping_does_not_model_are_refused_with_the_reason():
    """LFM2-VL without its image markers runs the pictures together; Ovis 2 with a tile edge of patches that
    hidden_stride does not divide pads the last token row and column."""
    processor = tiny_processor("lfm2_vl")
    adapter = adapter_for(REGION_CONFIGS["lfm2_vl"](), processor)
    bare = processor(
        text=[f"a {processor.image_token} b"], images=[_image((200, 130))], use_image_special_tokens=False,
        return_tensors="pt",
    )  # fmt: skip
    with pytest.raises(ValueError, match="use_image_special_tokens=True"):
        adapter.region_positions(bare, (0, 0, 10, 10), (200, 130))
    config = REGION_CONFIGS["ovis2"]()
    config.vision_config.image_size = 21  # 3 x 3 patches of 7 px, strided by 2
    with pytest.raises(ValueError, match="not a multiple of hidden_stride 2"):
        adapter_for(config)
