"""One small adapter per model family: where the text backbone's attention heads are, which ``input_ids``
positions hold the image tokens of a region given in pixels of the original image, and how the text
backbone's per-item inputs are repeated when one item is copied once per head-set (``run_head_sets``).

Hand-written adapters (``ADAPTERS``: Qwen2/2.5/3-VL (and 3-VL MoE), Qwen3.5, GLM-4V, Gemma 3 (with pan-and-scan
crops), PaliGemma, Mistral 3, LLaVA (CLIP crop or Pixtral native resolution), InternVL, Aya Vision, Ovis 2,
LFM2-VL, LLaVA-NeXT / OneVision, Idefics3 / SmolVLM, Gemma 4, Molmo 2) know their family's image-token layout, so
they also map a pixel region to its image tokens.

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
from transformers.image_processing_utils import select_best_resolution
from transformers.models.got_ocr2.image_processing_got_ocr2 import get_optimal_tiled_canvas
from transformers.models.idefics3.image_processing_idefics3 import (
    MAX_IMAGE_SIZE,
    _resize_output_size_rescale_to_max_len,
    _resize_output_size_scale_below_upper_bound,
)
from transformers.models.lfm2_vl.image_processing_lfm2_vl import find_closest_aspect_ratio
from transformers.models.molmo2.image_processing_molmo2 import compute_crop_geometry
from transformers.models.ovis2.image_processing_ovis2 import get_min_tile_covering_grid
from transformers.models.ovis2.image_processing_ovis2 import get_optimal_tiled_canvas as ovis2_tiled_canvas

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
        row_range = _cells((y0 - by0) / (by1 - by0) * rows, (y1 - by0) / (by1 - by0) * rows, rows)
        col_range = _cells((x0 - bx0) / (bx1 - bx0) * cols, (x1 - bx0) / (bx1 - bx0) * cols, cols)
        return self.positions[[r * cols + c for r in row_range for c in col_range]]


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


def _described(value) -> str:
    """A value for an error message: a tensor's shape, else its type."""
    if isinstance(value, torch.Tensor):
        return f"a tensor {tuple(value.shape)}"
    return "nothing" if value is None else type(value).__name__


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
    """Qwen2-VL, Qwen2.5-VL, Qwen3-VL (and its MoE), Qwen3.5, GLM-4V: the processor resizes the image onto a patch
    grid (image_grid_thw, in patches); one token per spatial_merge_size^2 patches, row-major."""

    merge: int = 2

    def image_token_grid(self, inputs, batch_index, image_index):
        grids = inputs["image_grid_thw"].tolist()  # [n_images, 3] (t, h, w) in patches
        merged = [(t * h // self.merge, w // self.merge) for t, h, w in grids]
        spans = _image_spans(inputs["input_ids"], self.image_token_id, [r * c for r, c in merged])
        return _one_image(spans, batch_index, image_index), _image_grid(merged, spans, batch_index, image_index)

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


def _image_grid(grids: list, spans, batch_index: int, image_index: int):
    return grids[sum(len(row) for row in spans[:batch_index]) + image_index]


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
        spans = _image_spans(inputs["input_ids"], self.image_token_id, [self.side**2] * n_images)
        return _one_image(spans, batch_index, image_index), (self.side, self.side)

    def views(self, inputs, image_size, batch_index, image_index):
        if not self.crop:
            return super().views(inputs, image_size, batch_index, image_index)
        width, height = image_size
        short = min(width, height)
        left, top = (width - short) / 2, (height - short) / 2  # the centre crop, in original pixels
        positions, grid = self.image_token_grid(inputs, batch_index, image_index)
        return [View("centre crop", (left, top, left + short, top + short), grid, positions)]


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


@dataclass
class InternVLAdapter(SquareGridAdapter):
    """InternVL: each tile (``tile`` = (height, width) pixels, resized, not cropped) gives side x side tokens
    (pixel-shuffled patches), row-major.

    The InternVL processor's default dynamic tiling (crop_to_patches=True) resizes the image onto a canvas of
    cols x rows tiles, the grid of min_tiles..max_tiles tiles whose aspect is closest to the image's
    (transformers' get_optimal_tiled_canvas), and, unless the canvas is one tile, adds a thumbnail: the whole
    image resized onto one tile. The tiles' tokens come row-major, then the thumbnail's. With
    crop_to_patches=False an image is one tile.
    """

    tile: tuple[int, int] = (448, 448)
    min_tiles: int = 1
    max_tiles: int = 12

    def _tile_positions(self, inputs, batch_index, image_index) -> torch.Tensor:
        """Positions [n_tiles, side * side] of one image's tokens, tile by tile: its runs of image tokens (one for
        InternVL, one per tile for Aya Vision), each image's last run after the token before the row's last run."""
        runs = _one_image(_run_images(inputs["input_ids"], self.image_token_id, "last"), batch_index, image_index)
        span = torch.cat(runs)
        if span.numel() % self.side**2:
            raise ValueError(
                f"{self.family} image {image_index} of batch row {batch_index} has {span.numel()} image tokens, "
                f"not a whole number of tiles of {self.side**2}"
            )
        return span.view(-1, self.side**2)

    def image_token_grid(self, inputs, batch_index, image_index):
        return self._tile_positions(inputs, batch_index, image_index)[-1], (self.side, self.side)

    def views(self, inputs, image_size, batch_index, image_index):
        tiles = self._tile_positions(inputs, batch_index, image_index)  # [n_tiles, side^2]
        grid, (width, height) = (self.side, self.side), image_size
        if len(tiles) == 1:
            return [View("image", (0, 0, width, height), grid, tiles[0])]
        cols, rows = get_optimal_tiled_canvas((height, width), self.tile, self.min_tiles, self.max_tiles)
        if cols * rows + 1 != len(tiles):
            raise ValueError(
                f"{self.family} image {image_index} of batch row {batch_index} has {len(tiles)} tiles, but the "
                f"tiling of a {width}x{height} image onto {self.tile[1]}x{self.tile[0]} tiles "
                f"({self.min_tiles}..{self.max_tiles} tiles) gives {cols}x{rows} tiles and a thumbnail: build the "
                "adapter with the processor that made the inputs (adapter_for(config, processor)), with its "
                "min_patches and max_patches"
            )
        thumbnail = View("thumbnail", (0, 0, width, height), grid, tiles[-1])
        return [*_tile_views(width, height, rows, cols, [(grid, t) for t in tiles[:-1]]), thumbnail]


def _tile_views(width: float, height: float, rows: int, cols: int, tiles: list) -> list[View]:
    """The views of an image stretched onto rows x cols tiles (row-major), each tile's (grid, positions) given."""
    dx, dy = width / cols, height / rows  # a tile's share of the original image
    return [
        View(f"tile ({r}, {c})", (c * dx, r * dy, (c + 1) * dx, (r + 1) * dy), *tiles[r * cols + c])
        for r in range(rows)
        for c in range(cols)
    ]


def _run_images(input_ids: torch.Tensor, image_token_id: int, marked: str) -> list[list[list[torch.Tensor]]]:
    """Per batch row, per image: its runs of image tokens (positions [n] each), in order. Images are told apart by
    the token next to a run, which must be the one next to the same run of the row's first or last image:
    ``marked`` "last": each image's last run follows the token before the row's last run (<global-img>, Aya's
    TILE_GLOBAL, InternVL's <img>); "first": each image's first run follows the token before the row's first run
    (Ovis 2's <IMG_START>); "end": each image's last run is followed by the token after the row's last run
    (LFM2-VL's <|image_end|>)."""
    images_per_row = []
    for row in input_ids:
        runs = [torch.arange(start, start + length) for start, length in _runs(row == image_token_id)]
        before = [int(row[run[0] - 1]) for run in runs]  # the token before each run
        after = [int(row[run[-1] + 1]) if run[-1] + 1 < len(row) else None for run in runs]
        images, current = [], []
        for k, run in enumerate(runs):
            if marked == "first" and current and before[k] == before[0]:
                images.append(current)
                current = []
            current.append(run)
            if (marked == "last" and before[k] == before[-1]) or (marked == "end" and after[k] == after[-1]):
                images.append(current)
                current = []
        images_per_row.append(images + [current] * bool(current))
    return images_per_row


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
class AyaVisionAdapter(InternVLAdapter):
    """Aya Vision: InternVL's tiling (GotOcr2ImageProcessor's crop_to_patches, which AyaVisionProcessor turns on):
    the tiles row-major, then the thumbnail (its "global" tile), each side x side pixel-shuffled tokens, row-major.
    AyaVisionProcessor.replace_image_token puts a TILE_<k> marker before each tile's run of image tokens and
    TILE_GLOBAL before the thumbnail's."""


@dataclass
class Ovis2Adapter(SquareGridAdapter):
    """Ovis 2: each picture (``tile`` pixels square) gives side x side tokens (patches grouped hidden_stride x
    hidden_stride, row-major), each a softmax over the visual vocabulary. With crop_to_patches on, the image
    processor (Ovis2ImageProcessor.crop_image_to_patches) stretches the image onto cols x rows tiles (the fewest
    tiles covering 90% of it, get_min_tile_covering_grid, or with use_covering_area_grid=False the closest aspect,
    get_optimal_tiled_canvas) and puts the thumbnail (the whole image on one tile) first; Ovis2Processor's
    replace_image_token opens each image with <IMG_START>, then the thumbnail's run, <IMG_GRID>, and the tiles'
    runs row-major between <IMG_COL> / <IMG_ROW>. An image on one tile is that tile only."""

    tile: int = 448
    min_tiles: int = 1
    max_tiles: int = 12
    covering: bool = True  # use_covering_area_grid

    def _tile_positions(self, inputs, batch_index, image_index) -> torch.Tensor:
        """Positions [n_pictures, side * side] of one image's tokens, the thumbnail first."""
        return torch.stack(
            _one_image(_run_images(inputs["input_ids"], self.image_token_id, "first"), batch_index, image_index)
        )

    def image_token_grid(self, inputs, batch_index, image_index):
        return self._tile_positions(inputs, batch_index, image_index)[0], (self.side, self.side)

    def views(self, inputs, image_size, batch_index, image_index):
        pictures = self._tile_positions(inputs, batch_index, image_index)  # [n_pictures, side^2]
        grid, (width, height) = (self.side, self.side), image_size
        if len(pictures) == 1:
            return [View("image", (0, 0, width, height), grid, pictures[0])]
        if self.covering:
            cols, rows = get_min_tile_covering_grid((height, width), self.tile, self.max_tiles)
        else:
            cols, rows = ovis2_tiled_canvas((height, width), (self.tile, self.tile), self.min_tiles, self.max_tiles)
        if cols * rows + 1 != len(pictures):
            raise ValueError(
                f"ovis2 image {image_index} of batch row {batch_index} has {len(pictures)} pictures, but tiling a "
                f"{width}x{height} image onto {self.tile} px tiles (at most {self.max_tiles}, covering grid "
                f"{self.covering}) gives a thumbnail and {cols}x{rows} tiles: build the adapter with the processor "
                "that made the inputs (adapter_for(config, processor))"
            )
        thumbnail = View("thumbnail", (0, 0, width, height), grid, pictures[0])
        return [thumbnail, *_tile_views(width, height, rows, cols, [(grid, p) for p in pictures[1:]])]


@dataclass
class Lfm2VlAdapter(Adapter):
    """LFM2-VL: each picture is a grid of patches (``spatial_shapes``, rows x cols of encoder patches) whose
    factor x factor blocks become one token each, row-major (Lfm2VlModel.get_image_features). A small image is
    one picture, resized (Lfm2VlImageProcessor.smart_resize); a large one is stretched onto cols x rows tiles
    (find_closest_aspect_ratio over min_tiles..max_tiles tiles) and split row-major, then the smart-resized whole
    image follows as the thumbnail (use_thumbnail). Lfm2VlProcessor._build_image_tokens wraps each image in
    <|image_start|> .. <|image_end|> and marks each tile and the thumbnail, so every picture is one run of image
    tokens (with use_image_special_tokens, its default: without it pictures cannot be told apart)."""

    factor: int = 2  # downsample_factor
    tile: int = 512  # tile_size
    min_tiles: int = 2
    max_tiles: int = 10
    thumbnail: bool = True  # use_thumbnail

    def _pictures(self, inputs, batch_index, image_index) -> list[tuple[torch.Tensor, tuple[int, int]]]:
        """Each picture of one image: positions [rows * cols] and its token grid (rows, cols)."""
        images = _run_images(inputs["input_ids"], self.image_token_id, "end")
        runs = _one_image(images, batch_index, image_index)
        grids = [(h // self.factor, w // self.factor) for h, w in inputs["spatial_shapes"].tolist()]  # per picture
        before = sum(len(image) for row in images[:batch_index] for image in row)  # pictures of the rows above
        before += sum(len(image) for image in images[batch_index][:image_index])
        pictures = list(zip(runs, grids[before : before + len(runs)]))
        if len(pictures) != len(runs) or any(run.numel() != r * c for run, (r, c) in pictures):
            raise ValueError(
                f"lfm2_vl image {image_index} of batch row {batch_index}: its runs of image tokens "
                f"({[run.numel() for run in runs]}) are not its pictures' token grids (spatial_shapes // "
                f"{self.factor}): process the images with use_image_special_tokens=True (Lfm2VlProcessor's default), "
                "which marks every tile and the thumbnail"
            )
        return pictures

    def image_token_grid(self, inputs, batch_index, image_index):
        pictures = self._pictures(inputs, batch_index, image_index)
        if len(pictures) > 1 and not self.thumbnail:
            raise ValueError("lfm2_vl with use_thumbnail=False: no picture shows the whole of a tiled image")
        return pictures[-1]

    def _tiles(self, width: int, height: int) -> tuple[int, int]:
        """(rows, cols) of tiles a large image is split into (Lfm2VlImageProcessor._get_grid_layout)."""
        low, high = self.min_tiles, self.max_tiles
        ratios = [(w, h) for n in range(low, high + 1) for w in range(1, n + 1) for h in range(1, n + 1)]
        ratios = sorted(set(r for r in ratios if low <= r[0] * r[1] <= high), key=lambda r: r[0] * r[1])
        cols, rows = find_closest_aspect_ratio(width / height, ratios, width, height, self.tile)
        return rows, cols

    def views(self, inputs, image_size, batch_index, image_index):
        pictures = self._pictures(inputs, batch_index, image_index)
        width, height = image_size
        if len(pictures) == 1:
            return [View("image", (0, 0, width, height), pictures[0][1], pictures[0][0])]
        rows, cols = self._tiles(width, height)
        if rows * cols + self.thumbnail != len(pictures):
            raise ValueError(
                f"lfm2_vl image {image_index} of batch row {batch_index} has {len(pictures)} pictures, but splitting "
                f"a {width}x{height} image onto {self.tile} px tiles ({self.min_tiles}..{self.max_tiles} tiles) gives "
                f"{rows}x{cols} tiles{' and the thumbnail' * self.thumbnail}: build the adapter with the processor "
                "that made the inputs (adapter_for(config, processor))"
            )
        tiles = _tile_views(width, height, rows, cols, [(grid, run) for run, grid in pictures[: rows * cols]])
        if not self.thumbnail:
            return tiles
        (run, grid) = pictures[-1]
        return [*tiles, View("thumbnail", (0, 0, width, height), grid, run)]


@dataclass
class AnyResAdapter(Adapter):
    """LLaVA-NeXT and LLaVA-OneVision (any resolution): an image gives a base view (the whole image resized onto
    one tile) and the tiles of a canvas (the image processor's best ``pinpoints`` resolution, the image resized
    onto it keeping its aspect and centred in padding). The model joins the tiles' side x side token grids into
    one grid over the canvas, drops the rows or columns of padding (unpadding) and ends each row with a newline
    token; OneVision then shrinks a grid of more than 1.1^2 ``max_tiles`` tiles' tokens (bilinear,
    LlavaOnevisionModel.pack_image_features), so a token there mixes up to 2 x 2 tokens of the unshrunk grid: its
    view is a ``ResampledView``. Tokens: the base's side^2, then the grid's rows.

    OneVision processes an image of a batch row holding several images as one view only: padded to a square,
    resized onto one tile, side^2 tokens and a newline.
    """

    side: int = 24  # tokens per tile edge
    tile: int = 336  # pixels per tile edge
    pinpoints: tuple = ()  # canvas resolutions (height, width)
    max_tiles: int | None = None  # OneVision's anyres_max_<n>; None: LLaVA-NeXT (no shrinking)

    def _grid(self, width: int, height: int) -> tuple[tuple[int, int], Region, tuple[int, int] | None]:
        """The tiles' token grid (rows, cols) after unpadding (and shrinking), the box of the image it shows, and
        the grid before shrinking (None when not shrunk)."""
        canvas_h, canvas_w = select_best_resolution((height, width), [list(p) for p in self.pinpoints])
        if canvas_w / width < canvas_h / height:  # the resized image fills the canvas's width
            new_w, new_h = canvas_w, min(math.ceil(height * canvas_w / width), canvas_h)
        else:
            new_w, new_h = min(math.ceil(width * canvas_h / height), canvas_w), canvas_h
        paste_x, paste_y = (canvas_w - new_w) // 2, (canvas_h - new_h) // 2
        rows, cols = canvas_h // self.tile * self.side, canvas_w // self.tile * self.side  # tokens over the canvas
        top = left = 0  # token rows / cols of padding dropped on each side (the model's unpad_image)
        if width / height > cols / rows:
            top = (rows - int(round(height * cols / width, 7))) // 2
        else:
            left = (cols - int(round(width * rows / height, 7))) // 2
        pixel = self.tile / self.side  # canvas pixels per token
        box = (
            (left * pixel - paste_x) * width / new_w,
            (top * pixel - paste_y) * height / new_h,
            ((cols - left) * pixel - paste_x) * width / new_w,
            ((rows - top) * pixel - paste_y) * height / new_h,
        )
        rows, cols = rows - 2 * top, cols - 2 * left
        ratio = math.sqrt(rows * cols / (self.max_tiles * self.side**2)) if self.max_tiles else 0
        if ratio > 1.1:
            return (int(rows // ratio), int(cols // ratio)), box, (rows, cols)
        return (rows, cols), box, None

    def _layouts(self, inputs) -> list[tuple | None]:
        """Per image: its tiles' grid, box and unshrunk grid (``_grid``), or None for a OneVision image processed as
        one view."""
        counts = inputs.get("batch_num_images", [1] * len(inputs["image_sizes"]))
        patched = [int(n) == 1 for n in counts for _ in range(int(n))]
        return [
            self._grid(int(w), int(h)) if tiled else None
            for (h, w), tiled in zip(inputs["image_sizes"].tolist(), patched)
        ]

    def _span(self, inputs, batch_index, image_index) -> tuple[torch.Tensor, tuple | None]:
        layouts = self._layouts(inputs)
        counts = [self.side**2 + (1 if g is None else g[0][0] * (g[0][1] + 1)) for g in layouts]
        spans = _image_spans(inputs["input_ids"], self.image_token_id, counts)
        return _one_image(spans, batch_index, image_index), _image_grid(layouts, spans, batch_index, image_index)

    def image_token_grid(self, inputs, batch_index, image_index):
        span, _ = self._span(inputs, batch_index, image_index)
        return span[: self.side**2], (self.side, self.side)

    def views(self, inputs, image_size, batch_index, image_index):
        span, layout = self._span(inputs, batch_index, image_index)
        width, height = image_size
        base = span[: self.side**2]
        if layout is None:  # padded to a square, centred
            edge = max(width, height)
            left, top = -((edge - width) // 2), -((edge - height) // 2)
            return [View("padded square", (left, top, left + edge, top + edge), (self.side, self.side), base)]
        (rows, cols), box, unshrunk = layout
        grid = span[self.side**2 :].view(rows, cols + 1)[:, :cols].flatten()  # the newline tokens dropped
        tiles = View("tiles", box, (rows, cols), grid)
        if unshrunk is not None:
            tiles = ResampledView("tiles, shrunk", box, (rows, cols), grid, unshrunk)
        return [View("base image", (0, 0, width, height), (self.side, self.side), base), tiles]


@dataclass
class ResampledView(View):
    """A view whose token grid was resized from a finer one (``source`` rows x cols over the same box) by torch's
    bilinear interpolation (align_corners=False): a token's features mix the source cells of its non-zero taps,
    so a region maps to the tokens with a tap in a source cell it overlaps."""

    source: tuple[int, int] = (1, 1)  # (rows, cols) of the grid before resizing

    def positions_under(self, region: Region) -> torch.Tensor:
        bx0, by0, bx1, by1 = self.box
        x0, y0, x1, y1 = max(region[0], bx0), max(region[1], by0), min(region[2], bx1), min(region[3], by1)
        if x0 >= x1 or y0 >= y1:
            return self.positions[:0]
        (rows, cols), (source_rows, source_cols) = self.grid, self.source
        row_cells = set(
            _cells((y0 - by0) / (by1 - by0) * source_rows, (y1 - by0) / (by1 - by0) * source_rows, source_rows)
        )
        col_cells = set(
            _cells((x0 - bx0) / (bx1 - bx0) * source_cols, (x1 - bx0) / (bx1 - bx0) * source_cols, source_cols)
        )
        row_range = [r for r in range(rows) if _bilinear_taps(r, source_rows, rows) & row_cells]
        col_range = [c for c in range(cols) if _bilinear_taps(c, source_cols, cols) & col_cells]
        return self.positions[[r * cols + c for r in row_range for c in col_range]]


def _bilinear_taps(index: int, n_in: int, n_out: int) -> set[int]:
    """The input cells [0, n_in) with non-zero weight in output cell ``index`` of a bilinear resize to n_out cells,
    align_corners=False (ATen's area_pixel_compute_source_index: (index + 0.5) * n_in / n_out - 0.5, clamped at 0)."""
    source = max((index + 0.5) * n_in / n_out - 0.5, 0.0)
    low = min(int(source), n_in - 1)
    return {low, min(low + 1, n_in - 1)} if source - low > 1e-6 else {low}


@dataclass
class SplitImageAdapter(Adapter):
    """Idefics3 and SmolVLM (image splitting): the processor resizes the image (longest edge to ``longest_edge``,
    aspect kept) then stretches it onto a canvas of rows x cols squares of ``tile`` pixels (each edge rounded up to
    whole tiles) and splits it, row-major, adding the whole image resized onto one tile (the global image) last;
    an image of one tile is that tile only. Each tile gives side x side tokens (pixel-shuffled patches), row-major,
    one run of image tokens per tile between marker tokens; the global image's run follows the <global-img> token.
    With do_image_splitting=False every image is the global image only.
    """

    side: int = 13  # tokens per tile edge
    tile: int = 364  # pixels per tile edge (max_image_size)
    longest_edge: int = 1456  # the first resize (size["longest_edge"])
    splitting: bool = True

    def language_model(self, model):
        return model.model.text_model

    def _canvas(self, width: int, height: int) -> tuple[int, int]:
        """(rows, cols) of tiles the processor splits an image into; (0, 0): not split."""
        height, width = _resize_output_size_rescale_to_max_len(height, width, max_len=self.longest_edge)
        height, width = _resize_output_size_scale_below_upper_bound(height, width, max_len=MAX_IMAGE_SIZE)
        aspect = width / height  # resize_for_vision_encoder
        if width >= height:
            width = math.ceil(width / self.tile) * self.tile
            height = math.ceil(int(width / aspect) / self.tile) * self.tile
        else:
            height = math.ceil(height / self.tile) * self.tile
            width = math.ceil(int(height * aspect) / self.tile) * self.tile
        if not self.splitting or (height <= self.tile and width <= self.tile):
            return 0, 0
        return height // self.tile, width // self.tile

    def _tile_positions(self, inputs, batch_index, image_index) -> torch.Tensor:
        """Positions [n_tiles, side * side] of one image's tokens, tile by tile (the global image last): one run of
        image tokens per tile; an image ends with the run after the token that precedes each row's last run."""
        return torch.stack(
            _one_image(_run_images(inputs["input_ids"], self.image_token_id, "last"), batch_index, image_index)
        )

    def image_token_grid(self, inputs, batch_index, image_index):
        return self._tile_positions(inputs, batch_index, image_index)[-1], (self.side, self.side)

    def views(self, inputs, image_size, batch_index, image_index):
        tiles = self._tile_positions(inputs, batch_index, image_index)  # [n_tiles, side^2]
        width, height = image_size
        rows, cols = self._canvas(width, height)
        if len(tiles) != rows * cols + 1:
            raise ValueError(
                f"{self.family} image {image_index} of batch row {batch_index} has {len(tiles)} tiles, but splitting "
                f"a {width}x{height} image (longest edge {self.longest_edge}, tiles of {self.tile}) gives "
                f"{rows}x{cols} tiles and the global image: build the adapter with the processor that made the inputs"
            )
        grid = (self.side, self.side)
        views = _tile_views(width, height, rows, cols, [(grid, t) for t in tiles[:-1]]) if rows else []
        return [*views, View("global image", (0, 0, width, height), grid, tiles[-1])]


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


@dataclass
class Molmo2Adapter(Adapter):
    """Molmo 2 (transformers' molmo2): two views of each image, each a patch grid pooled pool_h x pool_w into
    tokens, row-major. Molmo2ImageProcessor._image_batch_to_patches_and_grids makes the low-res view (the whole
    image resized onto one ``crop`` px square, build_resized_image) and the high-res view: the image stretched onto
    a canvas of tiling_h x tiling_w overlapping crops (compute_crop_geometry), whose patches are each taken once,
    from the crop where they lie outside the overlap margins (_build_overlapping_crops), so the high-res patches
    form one grid over the canvas. arange_for_pooling pads a grid whose edge is not a multiple of the pooling
    window with half the missing patches before, the rest after, so a token's window may hang over the image's
    edge. Molmo2Processor.replace_image_token writes the low-res tokens, then the high-res ones, each row followed
    by an <im_col> token (not an image token); ``image_grids`` gives each image's pooled grids
    [low_rows, low_cols, high_rows, high_cols]. Molmo2Adapter.forward pools each window by attention over its own
    patches only, so a token's features come from its window's pixels."""

    patch: int = 14  # patch_size
    crop: int = 378  # size["height"]: crop edge and low-res edge, pixels
    margins: tuple[int, int] = (4, 4)  # overlap_margins, patches
    max_crops: int = 8
    pooling: tuple[int, int] = (2, 2)  # pooling_size (pool_h, pool_w)

    def attending_both_ways(self, item):
        """The image tokens and their markers (<im_start>, <im_col>, <im_end>: mm_token_type_ids 1), all of a row's
        images one bidirectional block (Molmo2Model.forward's block_sequence_ids)."""
        if "mm_token_type_ids" not in item:  # the model's mask is causal
            return super().attending_both_ways(item)
        return (item["mm_token_type_ids"][0] == 1).nonzero().flatten()

    def _span(self, inputs, batch_index, image_index) -> tuple[torch.Tensor, list[int]]:
        grids = inputs["image_grids"].tolist()  # [n_images, 4]: low_rows, low_cols, high_rows, high_cols (tokens)
        spans = _image_spans(inputs["input_ids"], self.image_token_id, [a * b + c * d for a, b, c, d in grids])
        return _one_image(spans, batch_index, image_index), _image_grid(grids, spans, batch_index, image_index)

    def image_token_grid(self, inputs, batch_index, image_index):
        span, (rows, cols, _, _) = self._span(inputs, batch_index, image_index)
        return span[: rows * cols], (rows, cols)

    def views(self, inputs, image_size, batch_index, image_index):
        span, grid = self._span(inputs, batch_index, image_index)
        width, height = image_size
        _, _, canvas_h, canvas_w = compute_crop_geometry(
            height, width, self.max_crops, list(self.margins), self.crop, self.patch
        )
        side = self.crop // self.patch
        low = self._pooled("low-res image", width, height, (side, side), span[: grid[0] * grid[1]])
        high = self._pooled(
            "high-res crops",
            width,
            height,
            (canvas_h // self.patch, canvas_w // self.patch),
            span[grid[0] * grid[1] :],
        )
        if [*low.grid, *high.grid] != grid:
            raise ValueError(
                f"molmo2 image {image_index} of batch row {batch_index}: image_grids says {grid}, but a "
                f"{width}x{height} image on {self.crop} px crops of {self.patch} px patches (margins {self.margins}, "
                f"at most {self.max_crops} crops, pooling {self.pooling}) gives {[*low.grid, *high.grid]}: build the "
                "adapter with the processor that made the inputs (adapter_for(config, processor))"
            )
        return [low, high]

    def _pooled(self, name: str, width: int, height: int, patches: tuple[int, int], positions) -> View:
        """The view of the image stretched onto a patches = (rows, cols) grid, pooled into tokens after padding."""
        (pool_h, pool_w), (patch_rows, patch_cols) = self.pooling, patches
        rows, cols = -(-patch_rows // pool_h), -(-patch_cols // pool_w)
        top, left = (rows * pool_h - patch_rows) // 2, (cols * pool_w - patch_cols) // 2  # padding patches before
        dy, dx = height / patch_rows, width / patch_cols  # original pixels per patch
        box = (-left * dx, -top * dy, (cols * pool_w - left) * dx, (rows * pool_h - top) * dy)
        return View(name, box, (rows, cols), positions)


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


def _qwen(config, image_processor=None, processor=None) -> Adapter:
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


def _gemma3(config, image_processor=None, processor=None) -> Adapter:
    shape = _text_shape(config.text_config)
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


def _paligemma(config, image_processor=None, processor=None) -> Adapter:
    shape = _text_shape(config.text_config)
    vision = config.vision_config
    if image_processor is not None and getattr(image_processor, "do_center_crop", False):
        raise ValueError("paligemma adapter maps the image resized onto the square, not centre crops (do_center_crop)")
    return SquareGridAdapter(
        family="paligemma",
        candidate_layers=_softmax_layers(config.text_config, shape["n_layers"]),
        image_token_id=_image_token_id(config),
        side=vision.image_size // vision.patch_size,
        crop=False,
        **shape,
    )


def _mistral3(config, image_processor=None, processor=None) -> Adapter:
    shape = _text_shape(config.text_config)
    return PixtralAdapter(
        family="mistral3",
        candidate_layers=_softmax_layers(config.text_config, shape["n_layers"]),
        image_token_id=_image_token_id(config),
        unit=config.vision_config.patch_size * config.spatial_merge_size,
        **shape,
    )


def _llava(config, image_processor=None, processor=None) -> Adapter:
    shape = _text_shape(config.text_config)
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


def _internvl(config, image_processor=None, processor=None) -> Adapter:
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
        **_tiling(image_processor, tuple(vision.image_size)),
        **shape,
    )


def _tiling(image_processor, tile: tuple[int, int]) -> dict:
    """InternVL's tiling: the image processor's tile size and tile counts, else the config's tile and
    GotOcr2ImageProcessor's defaults (1..12 tiles)."""
    if image_processor is None:
        return dict(tile=tile, min_tiles=1, max_tiles=12)
    size = image_processor.size
    return dict(
        tile=(size.height, size.width), min_tiles=image_processor.min_patches, max_tiles=image_processor.max_patches
    )


def _anyres(config, image_processor=None, processor=None) -> Adapter:
    shape = _text_shape(config.text_config)
    vision = config.vision_config
    has_cls = vision.model_type == "clip_vision_model"
    if (config.vision_feature_select_strategy == "default") != has_cls:  # one token per patch: no CLS kept
        raise ValueError(
            f"{config.model_type} adapter needs one token per patch (CLIP's CLS dropped by the 'default' strategy, "
            f"SigLIP with 'full'); got {vision.model_type} with {config.vision_feature_select_strategy!r}"
        )
    aspect = getattr(config, "vision_aspect_ratio", None)
    return AnyResAdapter(
        family=config.model_type,
        candidate_layers=list(range(shape["n_layers"])),
        image_token_id=config.image_token_id,
        side=vision.image_size // vision.patch_size,
        tile=vision.image_size,
        pinpoints=tuple(map(tuple, config.image_grid_pinpoints)),
        max_tiles=int(aspect.removeprefix("anyres_max_")) if aspect else None,
        **shape,
    )


def _split_image(config, image_processor=None, processor=None) -> Adapter:
    shape = _text_shape(config.text_config)
    vision = config.vision_config
    tile, longest, splitting = vision.image_size, 4 * vision.image_size, True  # the image processors' defaults
    if image_processor is not None:
        tile, longest = image_processor.max_image_size["longest_edge"], image_processor.size.longest_edge
        splitting = image_processor.do_image_splitting
    if tile != vision.image_size:
        raise ValueError(f"{config.model_type}: tiles of {tile} px, but the vision tower takes {vision.image_size}")
    return SplitImageAdapter(
        family=config.model_type,
        candidate_layers=list(range(shape["n_layers"])),
        image_token_id=config.image_token_id,
        side=vision.image_size // vision.patch_size // config.scale_factor,
        tile=tile,
        longest_edge=longest,
        splitting=splitting,
        **shape,
    )


def _gemma4(config, image_processor=None, processor=None) -> Adapter:
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


def _aya_vision(config, image_processor=None, processor=None) -> Adapter:
    shape = _text_shape(config.text_config)
    vision = config.vision_config
    if config.vision_feature_select_strategy != "full":
        raise ValueError(
            "aya_vision adapter needs vision_feature_select_strategy='full' (SigLIP, one token per patch)"
        )
    return AyaVisionAdapter(
        family="aya_vision",
        candidate_layers=_softmax_layers(config.text_config, shape["n_layers"]),
        image_token_id=config.image_token_id,
        side=vision.image_size // vision.patch_size // config.downsample_factor,
        crop=False,
        **_tiling(image_processor, (vision.image_size, vision.image_size)),
        **shape,
    )


def _ovis2(config, image_processor=None, processor=None) -> Adapter:
    shape = _text_shape(config.text_config)
    vision = config.vision_config
    patches, stride = vision.image_size // vision.patch_size, vision.hidden_stride
    if patches % stride:
        raise ValueError(
            f"ovis2: {patches} patches per tile edge, not a multiple of hidden_stride {stride}; the vision tower pads "
            "the last token row and column with fewer patches, which the region mapping does not model"
        )
    tiling = dict(tile=vision.image_size, min_tiles=1, max_tiles=12, covering=True)  # Ovis2ImageProcessor's defaults
    if image_processor is not None:
        tiling = dict(
            tile=image_processor.size.height,
            min_tiles=image_processor.min_patches,
            max_tiles=image_processor.max_patches,
            covering=image_processor.use_covering_area_grid,
        )
    if tiling["tile"] != vision.image_size:
        raise ValueError(f"ovis2: tiles of {tiling['tile']} px, but the vision tower takes {vision.image_size}")
    return Ovis2Adapter(
        family="ovis2",
        candidate_layers=list(range(shape["n_layers"])),
        image_token_id=config.image_token_id,
        side=patches // stride,
        crop=False,
        **tiling,
        **shape,
    )


def _lfm2_vl(config, image_processor=None, processor=None) -> Adapter:
    shape = _text_shape(config.text_config)
    tiling = dict(tile=512, min_tiles=2, max_tiles=10, thumbnail=True)  # Lfm2VlImageProcessor's defaults
    if image_processor is not None:
        if image_processor.downsample_factor != config.downsample_factor:
            raise ValueError(
                f"lfm2_vl: the image processor downsamples by {image_processor.downsample_factor}, the model by "
                f"{config.downsample_factor}"
            )
        tiling = dict(
            tile=image_processor.tile_size,
            min_tiles=image_processor.min_tiles,
            max_tiles=image_processor.max_tiles,
            thumbnail=image_processor.use_thumbnail,
        )
    return Lfm2VlAdapter(
        family="lfm2_vl",
        candidate_layers=_softmax_layers(config.text_config, shape["n_layers"]),
        image_token_id=config.image_token_id,
        factor=config.downsample_factor,
        **tiling,
        **shape,
    )


def _molmo2(config, image_processor=None, processor=None) -> Adapter:
    shape = _text_shape(config.text_config)
    vision = config.vision_config
    # without the image processor: the vision tower's crop and patch, Molmo2ImageProcessor's other defaults
    layout = dict(patch=vision.patch_size, crop=vision.image_size[0], margins=(4, 4), max_crops=8, pooling=(2, 2))
    if image_processor is not None:
        layout = dict(
            patch=image_processor.patch_size,
            crop=image_processor.size.height,
            margins=tuple(image_processor.overlap_margins),
            max_crops=image_processor.max_crops,
            pooling=tuple(image_processor.pooling_size),
        )
    if (layout["patch"], [layout["crop"]] * 2) != (vision.patch_size, list(vision.image_size)):
        raise ValueError(
            f"molmo2: {layout['crop']} px crops of {layout['patch']} px patches, but the vision tower takes "
            f"{vision.image_size} px of {vision.patch_size} px patches"
        )
    return Molmo2Adapter(
        family="molmo2",
        candidate_layers=list(range(shape["n_layers"])),
        image_token_id=config.image_token_id,
        **layout,
        **shape,
    )


ADAPTERS = {
    "qwen2_vl": _qwen,
    "qwen2_5_vl": _qwen,
    "qwen3_vl": _qwen,
    "qwen3_vl_moe": _qwen,
    "qwen3_5": _qwen,
    "glm4v": _qwen,
    "gemma3": _gemma3,
    "paligemma": _paligemma,
    "mistral3": _mistral3,
    "llava": _llava,
    "internvl": _internvl,
    "gemma4": _gemma4,
    "llava_next": _anyres,
    "llava_onevision": _anyres,
    "idefics3": _split_image,
    "smolvlm": _split_image,
    "aya_vision": _aya_vision,
    "ovis2": _ovis2,
    "lfm2_vl": _lfm2_vl,
    "molmo2": _molmo2,
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
    ``processor`` (or its image processor), the layout follows the image processor: LLaVA's CLIP centre crop
    (``do_center_crop``, the default) or, without it, the whole image resized onto the square (the LLaVA toy);
    InternVL's tile size and tile counts."""
    if config.model_type not in ADAPTERS:
        return generic_adapter(config)
    return ADAPTERS[config.model_type](config, getattr(processor, "image_processor", processor), processor)
