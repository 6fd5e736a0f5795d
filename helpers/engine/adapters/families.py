"""The hand-written adapters: each model family's adapter factory ``(config, image_processor, processor)``."""

from helpers.engine.adapters.anyres import anyres_adapter
from helpers.engine.adapters.gemma3 import gemma3_adapter
from helpers.engine.adapters.gemma4 import gemma4_adapter
from helpers.engine.adapters.internvl import aya_vision_adapter, internvl_adapter
from helpers.engine.adapters.lfm2_vl import lfm2_vl_adapter
from helpers.engine.adapters.llava import llava_adapter
from helpers.engine.adapters.molmo2 import molmo2_adapter
from helpers.engine.adapters.ovis2 import ovis2_adapter
from helpers.engine.adapters.pixtral import mistral3_adapter
from helpers.engine.adapters.qwen import qwen_adapter
from helpers.engine.adapters.split_image import split_image_adapter
from helpers.engine.adapters.square_grid import paligemma_adapter

ADAPTERS = {
    "qwen2_vl": qwen_adapter,
    "qwen2_5_vl": qwen_adapter,
    "qwen3_vl": qwen_adapter,
    "qwen3_vl_moe": qwen_adapter,
    "qwen3_5": qwen_adapter,
    "glm4v": qwen_adapter,
    "gemma3": gemma3_adapter,
    "paligemma": paligemma_adapter,
    "mistral3": mistral3_adapter,
    "llava": llava_adapter,
    "internvl": internvl_adapter,
    "gemma4": gemma4_adapter,
    "llava_next": anyres_adapter,
    "llava_onevision": anyres_adapter,
    "idefics3": split_image_adapter,
    "smolvlm": split_image_adapter,
    "aya_vision": aya_vision_adapter,
    "ovis2": ovis2_adapter,
    "lfm2_vl": lfm2_vl_adapter,
    "molmo2": molmo2_adapter,
}
