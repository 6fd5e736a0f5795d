"""What every adapter shares: the ``Adapter`` base (a text backbone's softmax-attention heads and its image-token
layout), a ``View`` of an image on a grid of tokens, and the readers of configs the families build on."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from helpers.engine.adapters.layout import grid_cells

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

    def check_inputs(self, inputs: dict) -> None:
        """Refuse a one-item processor output whose parts disagree, before any forward: ``input_ids`` [1, T], the
        other per-position tensors [1, T], every image token attended, pixel inputs exactly when image tokens are
        (and, per family, the pixel rows the image tokens need: check_pixels)."""
        input_ids = inputs.get("input_ids")
        if not isinstance(input_ids, torch.Tensor) or input_ids.ndim != 2:
            raise ValueError(f"the inputs need input_ids as a [1, T] tensor, got {_described(input_ids)}")
        if input_ids.shape[0] != 1:
            raise ValueError(
                f"the inputs hold {input_ids.shape[0]} items (input_ids {tuple(input_ids.shape)}); pass one item: "
                "an Item, a Batch of one item, or build_batch(processor, [item]).inputs"
            )
        for name in ("attention_mask", "token_type_ids", "mm_token_type_ids"):
            value = inputs.get(name)
            if value is not None and tuple(value.shape) != tuple(input_ids.shape):
                raise ValueError(f"{name} has shape {tuple(value.shape)}, input_ids {tuple(input_ids.shape)}")
        image = self.image_positions(input_ids)[0]  # [T]
        if "attention_mask" in inputs and not bool(inputs["attention_mask"][0][image].all()):
            raise ValueError("the attention mask hides some image tokens: the inputs do not belong together")
        n_tokens, pixels = int(image.sum()), inputs.get("pixel_values")
        if (pixels is None) != (n_tokens == 0):
            raise ValueError(
                f"input_ids hold {n_tokens} image tokens but the inputs {'lack' if pixels is None else 'hold'} "
                "pixel_values: the inputs do not belong together"
            )
        if pixels is not None:
            self.check_pixels(inputs, n_tokens)

    def check_pixels(self, inputs: dict, n_tokens: int) -> None:
        """Refuse pixel inputs that do not give the item's ``n_tokens`` image tokens (a family whose layout says)."""

    def attending_both_ways(self, item: dict) -> torch.Tensor:
        """Positions [n] of a one-item input whose rows may attend to later ones among them: its image tokens."""
        return self.image_positions(item["input_ids"])[0].nonzero().flatten()

    def image_token_grid(
        self, inputs: dict, batch_index: int, image_index: int
    ) -> tuple[torch.Tensor, tuple[int, int]]:
        """Positions [rows * cols] of one image's tokens (row-major) and the grid (rows, cols); for a family that
        tiles the image, those of the view that shows the whole image (the thumbnail, the global image)."""
        raise NotImplementedError(f"{self.family} adapter has no image-token grid")

    def views(self, inputs: dict, image_size: tuple[int, int], batch_index: int, image_index: int) -> list[View]:
        """The pictures the processor makes of one image, each with its token grid (default: the whole image
        resized onto the grid of image_token_grid)."""
        positions, grid = self.image_token_grid(inputs, batch_index, image_index)
        return [View("image", (0, 0, *image_size), grid, positions)]

    def region_positions(
        self, inputs: dict, region: Region, image_size: tuple[int, int], batch_index: int = 0, image_index: int = 0
    ) -> torch.Tensor:
        """Positions [n] in input_ids[batch_index] of the image tokens covering ``region``, in every view of the
        image that shows part of it (each tile covering it and the thumbnail, for a family that tiles), sorted.

        ``region`` = (x0, y0, x1, y1) in pixels of the original image of size ``image_size`` = (width, height).
        """
        _check_region(region, image_size)
        views = self.views(inputs, image_size, batch_index, image_index)
        positions = torch.cat([view.positions_under(region) for view in views])
        if positions.numel() == 0:
            kept = ", ".join(f"the {view.name} {tuple(round(v) for v in view.box)}" for view in views)
            raise ValueError(f"region {tuple(region)} lies outside {kept}, what the processor keeps of the image")
        return positions.unique()

    def region_mask(
        self, inputs: dict, region: Region, image_size: tuple[int, int], batch_index: int = 0, image_index: int = 0
    ) -> torch.Tensor:
        """Bool [T] over input_ids[batch_index]: the region's image tokens."""
        mask = torch.zeros(inputs["input_ids"].shape[1], dtype=torch.bool)
        mask[self.region_positions(inputs, region, image_size, batch_index, image_index)] = True
        return mask


@dataclass
class View:
    """One picture the processor makes of (part of) an image: the box of the original image it shows, resized
    onto a grid of tokens."""

    name: str  # "image", "centre crop", "tile (row, col)", "thumbnail", ...
    box: Region  # the part of the original image it shows, in original pixels
    grid: tuple[int, int]  # (rows, cols) of tokens
    positions: torch.Tensor  # [rows * cols] positions in input_ids, row-major

    def positions_under(self, region: Region) -> torch.Tensor:
        """Positions [n] of the tokens whose cells the region overlaps (none when it misses the box)."""
        bx0, by0, bx1, by1 = self.box
        x0, y0, x1, y1 = max(region[0], bx0), max(region[1], by0), min(region[2], bx1), min(region[3], by1)
        if x0 >= x1 or y0 >= y1:
            return self.positions[:0]
        rows, cols = self.grid
        row_range = grid_cells((y0 - by0) / (by1 - by0) * rows, (y1 - by0) / (by1 - by0) * rows, rows)
        col_range = grid_cells((x0 - bx0) / (bx1 - bx0) * cols, (x1 - bx0) / (bx1 - bx0) * cols, cols)
        return self.positions[[r * cols + c for r in row_range for c in col_range]]


def _check_region(region: Region, image_size: tuple[int, int]) -> None:
    width, height = image_size
    x0, y0, x1, y1 = region
    if not (0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height):
        raise ValueError(
            f"region {tuple(region)} is not a non-empty box inside the {width}x{height} image "
            "(need 0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height)"
        )


def _described(value) -> str:
    """A value for an error message: a tensor's shape, else its type."""
    if isinstance(value, torch.Tensor):
        return f"a tensor {tuple(value.shape)}"
    return "nothing" if value is None else type(value).__name__


def adapter_sizes(text_config) -> dict:
    """The ``Adapter`` fields a text config gives: n_layers, n_heads, n_kv_heads (n_heads when unset) and head_dim
    (hidden_size // n_heads when unset)."""
    n_heads = text_config.num_attention_heads
    return dict(
        n_layers=text_config.num_hidden_layers,
        n_heads=n_heads,
        n_kv_heads=getattr(text_config, "num_key_value_heads", None) or n_heads,
        head_dim=getattr(text_config, "head_dim", None) or text_config.hidden_size // n_heads,
    )


def softmax_layers(text_config, n_layers: int) -> list[int]:
    """Decoder layers whose ``layer_types`` entry is a softmax attention ("full_attention", "sliding_attention",
    ...), not "linear_attention", "conv" or "mamba"; every layer when the config has no layer_types."""
    layer_types = getattr(text_config, "layer_types", None) or ["full_attention"] * n_layers
    return [i for i, kind in enumerate(layer_types) if kind.endswith("attention") and kind != "linear_attention"]


def config_image_token_id(config) -> int | None:
    """The image token's id: ``config.image_token_id``, else ``config.image_token_index``; None when neither."""
    token = getattr(config, "image_token_id", None)
    return getattr(config, "image_token_index", None) if token is None else token


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
