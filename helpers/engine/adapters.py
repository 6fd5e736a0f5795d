"""One small adapter per model family: where the text backbone's attention heads are, which ``input_ids``
positions hold the image tokens of a region given in pixels of the original image, and how the text
backbone's per-item inputs are repeated when one item is copied once per head-set (``run_head_sets``).

Hand-written adapters (``ADAPTERS``: Qwen2/2.5/3-VL, Qwen3.5, Gemma 3, LLaVA, InternVL, Gemma 4) know
their family's image-token layout, so they also map a pixel region to its image tokens.

Every other family gets the generic adapter (``GenericAdapter``) if its config says enough: a text
config (``config.get_text_config()``) with head counts, image tokens marked by ``config.image_token_id``
(or ``image_token_index``) in ``input_ids``, and images entering through those tokens (not through
cross-attention layers, as in Mllama). Its text backbone is found in the model (the submodule that runs
on the text config and holds the decoder ``layers``) and must route attention through transformers'
attention registry. Read, mask and steer then work on the whole image-token group (``image_positions``);
region-level calls refuse, since how an image's pixels map to tokens differs per family.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

Region = tuple[float, float, float, float]  # (x0, y0, x1, y1) in pixels of the original image


@dataclass
class Adapter:
    """The text backbone of one model: its softmax-attention heads and its image-token layout."""

    family: str
    n_layers: int  # decoder layers of the text backbone
    n_heads: int  # query heads per layer
    n_kv_heads: int
    head_dim: int
    candidate_layers: list[int]  # decoder layers whose heads are candidates (softmax attention)
    image_token_id: int
    min_split_layer: int = 0  # run_head_sets may run decoder layers < d once for all head-sets only if
    # d >= this: Qwen3-VL adds visual features after its first layers, Gemma 4
    # layers may reuse earlier layers' keys (then n_layers: never)

    @property
    def continues_from_cache(self) -> bool:
        """run_head_sets may run the copies' rows after an unchanged prefix only, continuing the clean item's keys
        and values: when every decoder layer is softmax attention (a recurrent layer's state is not a key)."""
        return len(self.candidate_layers) == self.n_layers

    @property
    def maps_regions(self) -> bool:
        """Pixel regions map to image tokens (region_positions), so the analyses keyed on regions can run."""
        return True

    def repeat_text_input(self, name: str, value, n: int):
        """One per-item input of the text backbone, repeated to batch n; None for an input this family
        does not know (``run_head_sets`` then refuses)."""
        if name == "attention_mask" and isinstance(value, dict):  # per layer type: [1, 1, T, T], a view per copy
            return {kind: None if m is None else m.expand(n, *m.shape[1:]) for kind, m in value.items()}
        if name in ("inputs_embeds", "attention_mask", "visual_pos_masks"):
            return value.repeat(n, *[1] * (value.ndim - 1))  # [1, ...] -> [n, ...]
        if name == "position_ids":
            return value.repeat(*[1] * (value.ndim - 2), n, 1)  # [..., 1, T] -> [..., n, T]
        return None

    def language_model(self, model):
        return model.model.language_model

    def attention_modules(self, model) -> list:
        """The softmax-attention module of each candidate layer, in candidate-layer order."""
        layers = self.language_model(model).layers
        return [layers[i].self_attn for i in self.candidate_layers]

    def image_positions(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Bool [B, T]: which positions hold image tokens."""
        return input_ids == self.image_token_id

    def image_token_grid(
        self, inputs: dict, batch_index: int, image_index: int
    ) -> tuple[torch.Tensor, tuple[int, int]]:
        """Positions [rows * cols] of one image's tokens (row-major) and the grid (rows, cols)."""
        raise NotImplementedError(f"{self.family} adapter has no image-token grid")

    def grid_cells(
        self,
        region: Region,
        image_size: tuple[int, int],
        grid: tuple[int, int],
        inputs: dict,
        batch_index: int,
        image_index: int,
    ) -> tuple[range, range]:
        """Grid rows and columns that the region overlaps (default: the image is resized onto the grid)."""
        width, height = image_size
        x0, y0, x1, y1 = region
        rows, cols = grid
        return _cells(y0 / height * rows, y1 / height * rows, rows), _cells(x0 / width * cols, x1 / width * cols, cols)

    def region_positions(
        self, inputs: dict, region: Region, image_size: tuple[int, int], batch_index: int = 0, image_index: int = 0
    ) -> torch.Tensor:
        """Positions [n] in input_ids[batch_index] of the image tokens covering ``region``.

        ``region`` = (x0, y0, x1, y1) in pixels of the original image of size ``image_size`` = (width, height).
        """
        _check_region(region, image_size)
        positions, grid = self.image_token_grid(inputs, batch_index, image_index)
        rows, cols = self.grid_cells(region, image_size, grid, inputs, batch_index, image_index)
        cells = torch.tensor([r * grid[1] + c for r in rows for c in cols], dtype=torch.long)
        return positions[cells]

    def region_mask(
        self, inputs: dict, region: Region, image_size: tuple[int, int], batch_index: int = 0, image_index: int = 0
    ) -> torch.Tensor:
        """Bool [T] over input_ids[batch_index]: the region's image tokens."""
        mask = torch.zeros(inputs["input_ids"].shape[1], dtype=torch.bool)
        mask[self.region_positions(inputs, region, image_size, batch_index, image_index)] = True
        return mask


def _check_region(region: Region, image_size: tuple[int, int]) -> None:
    width, height = image_size
    x0, y0, x1, y1 = region
    if not (0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height):
        raise ValueError(
            f"region {tuple(region)} is not a non-empty box inside the {width}x{height} image "
            "(need 0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height)"
        )


def _cells(start: float, stop: float, n: int) -> range:
    """Grid cells [0, n) overlapped by the interval [start, stop) in cell units."""
    first = min(max(int(math.floor(start)), 0), n - 1)
    last = min(max(int(math.ceil(stop)), first + 1), n)
    return range(first, last)


def _image_spans(
    input_ids: torch.Tensor, image_token_id: int, tokens_per_image: list[int]
) -> list[list[torch.Tensor]]:
    """Split each batch row's image-token positions into images, in order; images are numbered across the batch."""
    spans, image = [], 0
    for row in input_ids:
        positions = (row == image_token_id).nonzero().flatten()
        row_spans, start = [], 0
        while start < positions.numel():
            if image >= len(tokens_per_image):
                raise ValueError("input_ids hold more image tokens than the image inputs describe")
            n = tokens_per_image[image]
            row_spans.append(positions[start : start + n])
            start, image = start + n, image + 1
        spans.append(row_spans)
    return spans


def _one_image(spans, batch_index: int, image_index: int) -> torch.Tensor:
    if not 0 <= batch_index < len(spans):
        raise ValueError(f"batch_index {batch_index} out of range: batch has {len(spans)} rows")
    if not 0 <= image_index < len(spans[batch_index]):
        raise ValueError(
            f"image_index {image_index} out of range: batch row {batch_index} has {len(spans[batch_index])} image(s)"
        )
    return spans[batch_index][image_index]


@dataclass
class QwenVLAdapter(Adapter):
    """Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5: the processor resizes the image onto a patch grid
    (image_grid_thw, in patches); one token per spatial_merge_size^2 patches, row-major."""

    merge: int = 2

    def image_token_grid(self, inputs, batch_index, image_index):
        grids = inputs["image_grid_thw"].tolist()  # [n_images, 3] (t, h, w) in patches
        merged = [(t * h // self.merge, w // self.merge) for t, h, w in grids]
        spans = _image_spans(inputs["input_ids"], self.image_token_id, [r * c for r, c in merged])
        return _one_image(spans, batch_index, image_index), _image_grid(merged, spans, batch_index, image_index)

    def repeat_text_input(self, name, value, n):
        if name == "deepstack_visual_embeds":  # Qwen3-VL: [k, D] per deepstack layer
            return [v.repeat(n, 1) for v in value]  # -> [n k, D], batch-major
        return super().repeat_text_input(name, value, n)


def _image_grid(grids: list, spans, batch_index: int, image_index: int):
    return grids[sum(len(row) for row in spans[:batch_index]) + image_index]


@dataclass
class SquareGridAdapter(Adapter):
    """Gemma 3 (pooled grid) and LLaVA (patch grid): every image gives side x side tokens, row-major.

    ``crop``: the processor resizes the shorter edge then centre-crops to a square (LLaVA's CLIP
    processor); otherwise the image is resized onto the square (Gemma 3 without pan-and-scan).
    """

    side: int = 16
    crop: bool = False

    def image_token_grid(self, inputs, batch_index, image_index):
        n_images = int((inputs["input_ids"] == self.image_token_id).sum()) // (self.side**2)
        spans = _image_spans(inputs["input_ids"], self.image_token_id, [self.side**2] * n_images)
        return _one_image(spans, batch_index, image_index), (self.side, self.side)

    def grid_cells(self, region, image_size, grid, inputs, batch_index, image_index):
        if not self.crop:
            return super().grid_cells(region, image_size, grid, inputs, batch_index, image_index)
        width, height = image_size
        short = min(width, height)
        left, top = (width - short) / 2, (height - short) / 2  # the centre crop, in original pixels
        x0, y0, x1, y1 = region
        x0, x1 = max(x0 - left, 0), min(x1 - left, short)
        y0, y1 = max(y0 - top, 0), min(y1 - top, short)
        if x0 >= x1 or y0 >= y1:
            raise ValueError(
                f"region {tuple(region)} lies outside the centre crop the processor keeps "
                f"({left:.0f}, {top:.0f}, {left + short:.0f}, {top + short:.0f})"
            )
        return _cells(y0 / short * self.side, y1 / short * self.side, self.side), _cells(
            x0 / short * self.side, x1 / short * self.side, self.side
        )


@dataclass
class InternVLAdapter(SquareGridAdapter):
    """InternVL: each 448 x 448 tile (resized, not cropped) gives side x side tokens (pixel-shuffled patches).

    Only single-tile images are mapped: with the processor's dynamic tiling (crop_to_patches=True) an
    image becomes several tiles plus a thumbnail, and such inputs are refused.
    """

    def image_token_grid(self, inputs, batch_index, image_index):
        per_tile = self.side**2
        runs = [_runs(row == self.image_token_id) for row in inputs["input_ids"]]  # per row: [(start, length)]
        for row, row_runs in enumerate(runs):
            for k, (_start, length) in enumerate(row_runs):
                if length != per_tile:
                    raise ValueError(
                        f"InternVL image {k} of batch row {row} has {length} image tokens ({length / per_tile:g} tiles"
                        f" of {per_tile}); only single-tile images can be mapped to regions: process images with "
                        "crop_to_patches=False"
                    )
        spans = [[torch.arange(start, start + length) for start, length in row_runs] for row_runs in runs]
        return _one_image(spans, batch_index, image_index), (self.side, self.side)


def _runs(selected: torch.Tensor) -> list[tuple[int, int]]:
    """Maximal runs of True in a [T] bool tensor, as (start, length)."""
    positions = selected.nonzero().flatten().tolist()
    runs = []
    for p in positions:
        if runs and runs[-1][0] + runs[-1][1] == p:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((p, 1))
    return runs


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
        spans = _image_spans(inputs["input_ids"], self.image_token_id, [r * c for r, c in grids])
        return _one_image(spans, batch_index, image_index), _image_grid(grids, spans, batch_index, image_index)


NO_REGION_MAPPING = (
    "{family} has no region mapping (pixel region -> image tokens): only the hand-written adapters "
    "({hand_written}) have one. Whole-image groups (image_positions) can be read, masked and steered; the "
    "analyses that key on regions need one: discovery scores and panel profiles (helpers.measures.discovery, "
    "notebooks 01-02 and the head-sets built from them), CERS steering and the grid NCS "
    "(helpers.measures.steering, notebooks 03-04)"
)


@dataclass
class GenericAdapter(Adapter):
    """A family without a hand-written adapter: its text backbone is found in the model; no region mapping."""

    def language_model(self, model):
        """The submodule that runs the text config and holds the decoder ``layers`` (with ``self_attn``)."""
        text_config = model.config.get_text_config(decoder=True)
        found = [
            module
            for module in model.modules()
            if getattr(module, "config", None) is text_config
            and isinstance(getattr(module, "layers", None), torch.nn.ModuleList)
            and any(hasattr(layer, "self_attn") for layer in module.layers)
        ]
        if len(found) != 1:
            raise ValueError(
                f"{self.family}: expected one text backbone (a module on the text config with decoder layers "
                f"that have self_attn), found {len(found)}: {[type(m).__name__ for m in found]}"
            )
        if not found[0]._can_set_attn_implementation():  # transformers' test: its attention uses the registry
            raise ValueError(
                f"{self.family}: the text backbone {type(found[0]).__name__} does not route attention through "
                "transformers' attention registry, so the head-probe attention cannot run there"
            )
        return found[0]

    def attention_modules(self, model) -> list:
        layers = self.language_model(model).layers
        missing = [i for i in self.candidate_layers if not hasattr(layers[i], "self_attn")]
        if missing:
            raise ValueError(f"{self.family}: candidate decoder layers {missing} have no self_attn")
        return [layers[i].self_attn for i in self.candidate_layers]

    @property
    def maps_regions(self) -> bool:
        return False

    @property
    def no_region_mapping(self) -> str:
        """Why the region analyses cannot run on this family, and what can."""
        return NO_REGION_MAPPING.format(family=self.family, hand_written=", ".join(sorted(ADAPTERS)))

    def image_token_grid(self, inputs, batch_index, image_index):
        raise NotImplementedError(self.no_region_mapping)


def _text_shape(text_config) -> dict:
    n_heads = text_config.num_attention_heads
    return dict(
        n_layers=text_config.num_hidden_layers,
        n_heads=n_heads,
        n_kv_heads=getattr(text_config, "num_key_value_heads", None) or n_heads,
        head_dim=getattr(text_config, "head_dim", None) or text_config.hidden_size // n_heads,
    )


def _qwen(config) -> Adapter:
    text = config.text_config
    shape = _text_shape(text)
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


def _gemma3(config) -> Adapter:
    shape = _text_shape(config.text_config)
    side = int(round(math.sqrt(config.mm_tokens_per_image)))
    return SquareGridAdapter(
        family="gemma3",
        candidate_layers=list(range(shape["n_layers"])),
        image_token_id=config.image_token_id,
        side=side,
        crop=False,
        **shape,
    )


def _llava(config) -> Adapter:
    shape = _text_shape(config.text_config)
    vision = config.vision_config
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
        crop=True,
        **shape,
    )


def _internvl(config) -> Adapter:
    shape = _text_shape(config.text_config)
    vision = config.vision_config
    if config.vision_feature_select_strategy != "default" or list(vision.image_size) != list(
        reversed(vision.image_size)
    ):
        raise ValueError(
            f"InternVL adapter supports square tiles with vision_feature_select_strategy='default', got "
            f"image_size={vision.image_size}, strategy={config.vision_feature_select_strategy!r}"
        )
    side = int(vision.image_size[0] // vision.patch_size[0] * config.downsample_ratio)
    return InternVLAdapter(
        family="internvl",
        candidate_layers=list(range(shape["n_layers"])),
        image_token_id=config.image_token_id,
        side=side,
        crop=False,
        **shape,
    )


def _gemma4(config) -> Adapter:
    text = config.text_config
    shape = _text_shape(text)
    never = shape["n_layers"] if text.num_kv_shared_layers else 0
    return Gemma4Adapter(
        family="gemma4",
        candidate_layers=list(range(shape["n_layers"])),
        image_token_id=config.image_token_id,
        pooling=config.vision_config.pooling_kernel_size,
        min_split_layer=never,
        **shape,
    )


ADAPTERS = {
    "qwen2_vl": _qwen,
    "qwen2_5_vl": _qwen,
    "qwen3_vl": _qwen,
    "qwen3_5": _qwen,
    "gemma3": _gemma3,
    "llava": _llava,
    "internvl": _internvl,
    "gemma4": _gemma4,
}


def _softmax_layers(text_config, n_layers: int) -> list[int]:
    """Decoder layers whose ``layer_types`` entry is a softmax attention ("full_attention", "sliding_attention",
    ...), not "linear_attention", "conv" or "mamba"; every layer when the config has no layer_types."""
    layer_types = getattr(text_config, "layer_types", None) or ["full_attention"] * n_layers
    return [i for i, kind in enumerate(layer_types) if kind.endswith("attention") and kind != "linear_attention"]


def _generic_refusal(config) -> str | None:
    """Why the generic adapter cannot serve this config, or None."""
    text = config.get_text_config(decoder=True)
    if getattr(text, "cross_attention_layers", None):
        return (
            "feeds the image through cross-attention layers, not through image tokens in the sequence, so there "
            "is no image-token group for the self-attention heads to read, mask or steer"
        )
    if _image_token_id(config) is None:
        return "has no image_token_id / image_token_index in its config, so its image tokens cannot be found"
    if getattr(text, "num_attention_heads", None) is None or getattr(text, "num_hidden_layers", None) is None:
        return "has no num_attention_heads / num_hidden_layers in its text config"
    return None


def _image_token_id(config) -> int | None:
    token = getattr(config, "image_token_id", None)
    return getattr(config, "image_token_index", None) if token is None else token


def generic_adapter(config) -> GenericAdapter:
    """The generic adapter of a config (see the module docstring); raises when it cannot serve the family."""
    reason = _generic_refusal(config)
    if reason is not None:
        raise ValueError(
            f"model family {config.model_type!r} is not supported; supported: {', '.join(sorted(ADAPTERS))} "
            "(hand-written adapters) and, without region mapping, families whose text backbone uses transformers' "
            f"attention registry and marks image tokens with image_token_id. {config.model_type!r} {reason}"
        )
    text = config.get_text_config(decoder=True)
    shape = _text_shape(text)
    # run_head_sets may copy the hidden states at a decoder layer only if no later layer takes visual features
    # (deepstack) or reuses an earlier layer's keys (kv sharing); otherwise it copies the backbone's inputs
    deepstack = len(getattr(getattr(config, "vision_config", None), "deepstack_visual_indexes", None) or [])
    never = shape["n_layers"] if getattr(text, "num_kv_shared_layers", 0) else 0
    return GenericAdapter(
        family=config.model_type,
        candidate_layers=_softmax_layers(text, shape["n_layers"]),
        image_token_id=_image_token_id(config),
        min_split_layer=max(deepstack, never),
        **shape,
    )


def text_config_path(config) -> list[str]:
    """Sub-config keys from ``config`` down to its text config: ["text_config"] for most families, [] when the
    config is its own text config. The keys of the per-sub-config ``attn_implementation`` dict."""

    def path_to(node, target):
        if node is target:
            return []
        for key in node.sub_configs:
            sub = getattr(node, key, None)
            if sub is not None and (below := path_to(sub, target)) is not None:
                return [key, *below]
        return None

    path = path_to(config, config.get_text_config(decoder=True))
    if path is None:
        raise ValueError(f"{config.model_type}: the text config is not among the config's sub-configs")
    return path


def adapter_for(config, processor=None) -> Adapter:
    """The adapter of a model config: the family's hand-written one, else the generic one; an unsupported
    family raises, listing the supported ones and why the generic adapter does not apply. With the model's
    ``processor``, LLaVA's grid follows its image processor: CLIP's centre crop (``do_center_crop``, the
    default) or, without it, the whole image resized onto the square (the LLaVA toy)."""
    if config.model_type not in ADAPTERS:
        return generic_adapter(config)
    adapter = ADAPTERS[config.model_type](config)
    if config.model_type == "llava" and processor is not None:
        adapter.crop = bool(getattr(processor.image_processor, "do_center_crop", True))
    return adapter
