"""LLaVA-NeXT and LLaVA-OneVision (any resolution): a base view and the unpadded (shrunk) grid of tiles."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from transformers.image_processing_utils import select_best_resolution

from helpers.engine.adapters.base import Adapter, Region, View, adapter_sizes
from helpers.engine.adapters.layout import grid_cells, image_grid, image_spans, one_image


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
        spans = image_spans(inputs["input_ids"], self.image_token_id, counts)
        return one_image(spans, batch_index, image_index), image_grid(layouts, spans, batch_index, image_index)

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
            grid_cells((y0 - by0) / (by1 - by0) * source_rows, (y1 - by0) / (by1 - by0) * source_rows, source_rows)
        )
        col_cells = set(
            grid_cells((x0 - bx0) / (bx1 - bx0) * source_cols, (x1 - bx0) / (bx1 - bx0) * source_cols, source_cols)
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


def anyres_adapter(config, image_processor=None, processor=None) -> Adapter:
    shape = adapter_sizes(config.text_config)
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
