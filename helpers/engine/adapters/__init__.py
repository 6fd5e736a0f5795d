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

The package, one module per family or group of families that share a layout: ``base`` (``Adapter``, ``View``,
the config readers), ``layout`` (the image-token spans and grid cells every family reads), ``tiles`` (the tiling
families' shared layout), ``qwen``, ``square_grid`` (PaliGemma), ``gemma3``, ``pixtral`` (Mistral 3), ``llava``,
``internvl`` (and Aya Vision), ``ovis2``, ``lfm2_vl``, ``anyres`` (LLaVA-NeXT / OneVision), ``split_image``
(Idefics3 / SmolVLM), ``gemma4``, ``molmo2``; ``families`` (``ADAPTERS``, model type -> factory) and ``generic``
(``GenericAdapter``, ``adapter_for``, ``adapter_from_files``).
"""

from helpers.engine.adapters.anyres import AnyResAdapter, ResampledView
from helpers.engine.adapters.base import Adapter, Region, View, text_config_path
from helpers.engine.adapters.families import ADAPTERS
from helpers.engine.adapters.gemma3 import PAN_AND_SCAN, Gemma3Adapter
from helpers.engine.adapters.gemma4 import Gemma4Adapter
from helpers.engine.adapters.generic import (
    NO_REGION_MAPPING,
    GenericAdapter,
    adapter_for,
    adapter_from_files,
    generic_adapter,
)
from helpers.engine.adapters.internvl import AyaVisionAdapter, InternVLAdapter
from helpers.engine.adapters.lfm2_vl import Lfm2VlAdapter
from helpers.engine.adapters.molmo2 import Molmo2Adapter
from helpers.engine.adapters.ovis2 import Ovis2Adapter
from helpers.engine.adapters.pixtral import PixtralAdapter
from helpers.engine.adapters.qwen import QwenVLAdapter
from helpers.engine.adapters.split_image import SplitImageAdapter
from helpers.engine.adapters.square_grid import SquareGridAdapter

__all__ = [
    "ADAPTERS",
    "Adapter",
    "AnyResAdapter",
    "AyaVisionAdapter",
    "Gemma3Adapter",
    "Gemma4Adapter",
    "GenericAdapter",
    "InternVLAdapter",
    "Lfm2VlAdapter",
    "Molmo2Adapter",
    "NO_REGION_MAPPING",
    "Ovis2Adapter",
    "PAN_AND_SCAN",
    "PixtralAdapter",
    "QwenVLAdapter",
    "Region",
    "ResampledView",
    "SplitImageAdapter",
    "SquareGridAdapter",
    "View",
    "adapter_for",
    "adapter_from_files",
    "generic_adapter",
    "text_config_path",
]
