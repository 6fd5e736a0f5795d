"""Adapters: layer/head counts, region -> image-token mapping, loading from a save_pretrained folder."""

import numpy as np
import pytest
import torch
from PIL import Image
from tokenizers import Tokenizer, models
from transformers import (
    ChameleonConfig,
    Cohere2VisionImageProcessor,
    Gemma3ImageProcessor,
    Gemma4ImageProcessor,
    GotOcr2ImageProcessor,
    MllamaConfig,
    PretrainedConfig,
    PreTrainedTokenizerFast,
    Qwen2_5OmniConfig,
)
from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor

from helpers.engine import ATTENTION, Read, adapter_for, load_model, probe, wrap_model
from helpers.engine.adapters import GenericAdapter, adapter_from_files, generic_adapter
from helpers.engine.loading import attn_implementation_for
from tests.tiny_models import (
    CONFIGS,
    GENERIC_FAMILIES,
    IMAGE_TOKEN,
    VISION_END,
    VISION_START,
    tiny_inputs,
    tiny_model,
    tiny_processor,
    tiny_tokenizer,
)

CANDIDATES = {"qwen3_5": [1, 3], "lfm2_vl": [1, 2]}  # Qwen3.5: linear attention in layers 0 and 2; LFM2: conv in 0


@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_adapter_counts(family):
    model = tiny_model(family, ATTENTION)
    adapter = adapter_for(model.config)
    candidates = CANDIDATES.get(family, [0, 1, 2])
    n_layers = 4 if family == "qwen3_5" else 3
    assert (adapter.n_layers, adapter.n_heads, adapter.n_kv_heads, adapter.head_dim) == (n_layers, 4, 2, 16)
    assert adapter.candidate_layers == candidates
    modules = adapter.attention_modules(model)
    assert [m.layer_idx for m in modules] == candidates
    assert all(m.config._attn_implementation == ATTENTION for m in modules)


def test_unsupported_family_lists_supported_ones():
    config = PretrainedConfig()
    config.model_type = "blip_2"
    with pytest.raises(
        ValueError, match="'blip_2' is not supported; supported: aya_vision, gemma3, gemma4, glm4v, idefics3, internvl"
    ):
        adapter_for(config)


PAINT_SIZE = (200, 130)  # (width, height) of the painted test image
PAINT_REGIONS = [(105, 40, 150, 80), (0, 0, 20, 20), (170, 100, 200, 130)]


def _painted_and_blank(region) -> tuple[Image.Image, Image.Image]:
    """A black PAINT_SIZE image with `region` painted white, and the all-black image."""
    width, height = PAINT_SIZE
    image = np.zeros((height, width, 3), np.uint8)
    x0, y0, x1, y1 = region
    image[y0:y1, x0:x1] = 255
    return Image.fromarray(image), Image.fromarray(np.zeros_like(image))


def _painted_tokens(painted, blank, merge):
    """Merged-token indices whose patches differ from the blank image's (pixel_values rows, merge^2 per token)."""
    change = (painted - blank).abs().view(-1, merge * merge * painted.shape[1]).amax(1)  # [tokens]
    return set(change.gt(0.1).nonzero().flatten().tolist())


@pytest.mark.parametrize("region", PAINT_REGIONS)
def test_qwen_region_tokens_match_painted_patches(region):
    image, blank_image = _painted_and_blank(region)
    processor = Qwen2VLImageProcessor(
        patch_size=16, merge_size=2, temporal_patch_size=2, size={"shortest_edge": 64 * 64, "longest_edge": 256 * 256}
    )
    pixels = processor(images=[image], return_tensors="pt")
    blank = processor(images=[blank_image], return_tensors="pt")["pixel_values"]
    t, h, w = pixels["image_grid_thw"][0].tolist()
    n_tokens = t * h * w // 4
    input_ids = torch.tensor([[7, 8, VISION_START] + [IMAGE_TOKEN] * n_tokens + [VISION_END, 9]])
    adapter = adapter_for(tiny_model("qwen3_vl", ATTENTION).config)
    inputs = {"input_ids": input_ids, "image_grid_thw": pixels["image_grid_thw"]}
    positions = adapter.region_positions(inputs, region, PAINT_SIZE)
    assert set((positions - 3).tolist()) == _painted_tokens(pixels["pixel_values"], blank, 2)
    assert adapter.region_mask(inputs, region, PAINT_SIZE).sum() == positions.numel()


def test_region_outside_the_image_is_refused():
    lm = wrap_model(tiny_model("qwen3_vl", ATTENTION))
    inputs = tiny_inputs("qwen3_vl", lm.model)
    with pytest.raises(ValueError, match=r"region \(10, 10, 300, 50\) is not a non-empty box inside the 200x100"):
        lm.adapter.region_positions(inputs, (10, 10, 300, 50), (200, 100))
    with pytest.raises(ValueError, match="image_index 1 out of range"):
        lm.adapter.region_positions(inputs, (0, 0, 10, 10), (200, 100), image_index=1)


def test_gemma_and_llava_grids():
    gemma = wrap_model(tiny_model("gemma3", ATTENTION))  # 2 x 2 pooled grid
    inputs = tiny_inputs("gemma3", gemma.model, lengths=(3,))
    first = int((inputs["input_ids"][0] == IMAGE_TOKEN).nonzero()[0])
    assert (gemma.adapter.region_positions(inputs, (60, 0, 100, 10), (100, 50)) - first).tolist() == [1]
    assert (gemma.adapter.region_positions(inputs, (0, 20, 100, 50), (100, 50)) - first).tolist() == [0, 1, 2, 3]
    llava = wrap_model(tiny_model("llava", ATTENTION))  # 4 x 4 patch grid, centre crop
    inputs = tiny_inputs("llava", llava.model, lengths=(3,))
    first = int((inputs["input_ids"][0] == IMAGE_TOKEN).nonzero()[0])
    # 200 x 100 image: the processor keeps the centre 100 x 100 square (x 50..150)
    assert (llava.adapter.region_positions(inputs, (50, 0, 75, 25), (200, 100)) - first).tolist() == [0]
    assert (llava.adapter.region_positions(inputs, (140, 90, 200, 100), (200, 100)) - first).tolist() == [15]
    with pytest.raises(ValueError, match="outside the centre crop"):
        llava.adapter.region_positions(inputs, (0, 0, 40, 40), (200, 100))


def test_adapter_from_the_config_file_alone(tmp_path):
    config = tiny_model("qwen3_vl", ATTENTION).config
    config.save_pretrained(tmp_path)  # config.json only: no weights, no processor
    assert adapter_from_files(str(tmp_path)) == adapter_for(config)


@torch.no_grad()
def test_load_model_from_a_saved_folder(tmp_path):
    tiny_model("qwen3_vl", "sdpa").save_pretrained(tmp_path)
    processor = Qwen2VLImageProcessor(patch_size=16, merge_size=2, temporal_patch_size=2)
    processor.save_pretrained(tmp_path)
    lm = load_model(str(tmp_path))
    assert lm.adapter.family == "qwen3_vl" and lm.name == str(tmp_path)
    assert lm.model.config.text_config._attn_implementation == ATTENTION
    assert lm.model.config.vision_config._attn_implementation == "sdpa"
    inputs = tiny_inputs("qwen3_vl", lm.model)
    image = lm.adapter.image_positions(inputs["input_ids"])
    with probe(lm, read=Read(query_rows="all", groups={"image": image})) as rec:
        lm.model(**inputs)
    assert rec.mass.shape == (2, 3, 4, 1) and bool(((rec.mass >= 0) & (rec.mass <= 1 + 1e-6)).all())
    with pytest.raises(ValueError, match="dtype 'int8' is not supported"):
        load_model(str(tmp_path), dtype="int8")


@pytest.mark.parametrize("region", PAINT_REGIONS)
def test_internvl_region_tokens_match_painted_cells(region):
    """One 56 x 56 tile (resized, not cropped), 4 x 4 tokens of 14 x 14 pixels; tokens follow the painted pixels."""
    image, blank_image = _painted_and_blank(region)
    processor = GotOcr2ImageProcessor(
        crop_to_patches=False, size={"height": 56, "width": 56}, resample=0
    )  # nearest: no bleed at edges
    painted = processor(images=[image], return_tensors="pt")["pixel_values"]  # [1, 3, 56, 56]
    blank = processor(images=[blank_image], return_tensors="pt")["pixel_values"]
    change = (painted - blank).abs().amax(1)[0].view(4, 14, 4, 14).amax((1, 3))  # [4, 4] token cells
    expected = set(change.flatten().gt(0.1).nonzero().flatten().tolist())
    input_ids = torch.tensor([[7, VISION_START] + [IMAGE_TOKEN] * 16 + [VISION_END, 9]])
    adapter = adapter_for(tiny_model("internvl", ATTENTION).config)
    positions = adapter.region_positions({"input_ids": input_ids}, region, PAINT_SIZE)
    assert set((positions - 2).tolist()) == expected


def test_internvl_refuses_tiles_its_tiling_does_not_give():
    """A 100 x 100 image on 56 x 56 tiles (1..12 tiles) becomes 2 x 2 tiles and a thumbnail, not 3 tiles."""
    adapter = adapter_for(tiny_model("internvl", ATTENTION).config)
    tiled = {"input_ids": torch.tensor([[7, VISION_START] + [IMAGE_TOKEN] * 48 + [VISION_END]])}  # 3 tiles
    with pytest.raises(ValueError, match="has 3 tiles, but the tiling of a 100x100 image .* gives 2x2 tiles"):
        adapter.region_positions(tiled, (0, 0, 10, 10), (100, 100))


@pytest.mark.parametrize("region", PAINT_REGIONS)
def test_gemma4_region_tokens_match_painted_patches(region):
    """Gemma 4's processor resizes (aspect kept) to whole 2 x 2 blocks of 8 px patches; one token per block."""
    image, blank_image = _painted_and_blank(region)
    processor = Gemma4ImageProcessor(patch_size=8, pooling_kernel_size=2, max_soft_tokens=70, resample=0)
    painted = processor(images=[image], return_tensors="pt")
    blank = processor(images=[blank_image], return_tensors="pt")["pixel_values"]
    positions = painted["image_position_ids"][0]  # [max_patches, 2]
    real = (positions >= 0).all(-1)
    cols = int(positions[real, 0].max()) // 2 + 1
    changed = (painted["pixel_values"][0] - blank[0]).abs().amax(-1).gt(0.1) & real  # [max_patches]
    expected = {int(y) // 2 * cols + int(x) // 2 for x, y in positions[changed].tolist()}
    n_tokens = int(real.sum()) // 4
    input_ids = torch.tensor([[7, VISION_START] + [IMAGE_TOKEN] * n_tokens + [VISION_END, 9]])
    adapter = adapter_for(tiny_model("gemma4", ATTENTION).config)
    inputs = {"input_ids": input_ids, "image_position_ids": painted["image_position_ids"]}
    assert set((adapter.region_positions(inputs, region, PAINT_SIZE) - 2).tolist()) == expected


def test_gemma3_pan_and_scan_settings_and_refusals():
    """Pan-and-scan as the processor applies it: a Gemma3Processor's defaults win over its image processor's
    attributes; a bare image processor's attributes count. Inputs that do not hold the crops the adapter expects,
    and images after the first of a row, are refused, naming do_pan_and_scan."""
    config = CONFIGS["gemma3"]()
    on = tiny_processor("gemma3_pan_and_scan")
    assert adapter_for(config, on).pan_and_scan == (32, 4, 1.2)
    assert adapter_for(config, on.image_processor).pan_and_scan is None  # the image processor alone: off
    assert adapter_for(config, Gemma3ImageProcessor(do_pan_and_scan=True)).pan_and_scan == (256, 4, 1.2)
    assert adapter_for(config).pan_and_scan is None
    adapter = adapter_for(config, on)
    assert adapter.crops(200, 60) == [(0, 0, 67, 60), (67, 0, 134, 60), (134, 0, 200, 60)]
    assert adapter.crops(90, 160) == [(0, 0, 90, 80), (0, 80, 90, 160)] and adapter.crops(56, 56) == []
    image = Image.fromarray(np.zeros((130, 200, 3), np.uint8))
    inputs = on(text=["a <start_of_image> b"], images=[image], return_tensors="pt")
    assert len(adapter.views(inputs, (200, 130), 0, 0)) == 3  # the original and two crops
    plain = tiny_processor("gemma3")(text=["a <start_of_image> b"], images=[image], return_tensors="pt")
    with pytest.raises(ValueError, match=r"do_pan_and_scan=True\): batch row 0 holds 1 pictures, but a 200x130"):
        adapter.region_positions(plain, (0, 0, 10, 10), (200, 130))
    with pytest.raises(ValueError, match="image 1 of batch row 0 cannot be found.* do_pan_and_scan=False"):
        adapter.region_positions(inputs, (0, 0, 10, 10), (200, 130), image_index=1)


BACKBONES = {"cohere2_vision": "model.language_model"}  # where each generic family keeps its text backbone


@pytest.mark.parametrize("family", GENERIC_FAMILIES)
def test_generic_adapter_finds_the_text_backbone_and_refuses_regions(family):
    lm = wrap_model(tiny_model(family, ATTENTION))
    assert type(lm.adapter) is GenericAdapter and lm.adapter.image_token_id == IMAGE_TOKEN
    assert lm.adapter.language_model(lm.model) is lm.model.get_submodule(BACKBONES[family])
    assert lm.model.config.vision_config._attn_implementation == "sdpa"  # the probe runs on the text backbone only
    inputs = tiny_inputs(family, lm.model)
    assert lm.adapter.image_positions(inputs["input_ids"]).sum(1).tolist() == [4, 4]
    message = f"{family} has no region mapping .* discovery scores .* CERS steering and the grid NCS"
    with pytest.raises(NotImplementedError, match=message):
        lm.adapter.region_positions(inputs, (0, 0, 10, 10), (28, 28))
    with pytest.raises(NotImplementedError, match=message):
        lm.adapter.region_mask(inputs, (0, 0, 10, 10), (28, 28))
    with pytest.raises(NotImplementedError, match=message):
        lm.adapter.image_token_grid(inputs, 0, 0)


@pytest.mark.parametrize("family", sorted(set(CONFIGS) - set(GENERIC_FAMILIES)))
def test_generic_discovery_agrees_with_hand_written_adapters(family):
    """On the hand-written families the generic adapter finds the same backbone, layers and split rule."""
    model = tiny_model(family, ATTENTION)
    hand_written, generic = adapter_for(model.config), generic_adapter(model.config)
    assert generic.language_model(model) is hand_written.language_model(model)
    fields = ("n_layers", "n_heads", "n_kv_heads", "head_dim", "candidate_layers", "image_token_id", "min_split_layer")
    assert [getattr(generic, f) for f in fields] == [getattr(hand_written, f) for f in fields]
    assert generic.attention_modules(model) == hand_written.attention_modules(model)


def test_cross_attention_and_tokenless_families_are_refused():
    mllama = MllamaConfig(
        text_config=dict(num_hidden_layers=2, cross_attention_layers=[1]),
        vision_config=dict(num_hidden_layers=1, num_global_layers=1),
    )
    with pytest.raises(ValueError, match="'mllama' feeds the image through cross-attention layers"):
        adapter_for(mllama)
    with pytest.raises(ValueError, match="'chameleon' has no image_token_id / image_token_index"):
        adapter_for(ChameleonConfig())


def test_attn_implementation_targets_the_text_config():
    assert attn_implementation_for(CONFIGS["idefics3"]()) == {"text_config": ATTENTION}
    omni = Qwen2_5OmniConfig()  # the text config sits in the thinker
    omni._attn_implementation = attn_implementation_for(omni)
    assert attn_implementation_for(omni) == {"thinker_config": {"text_config": ATTENTION}}
    assert omni.thinker_config.text_config._attn_implementation == ATTENTION
    assert omni.thinker_config.vision_config._attn_implementation is None  # transformers' default
    assert attn_implementation_for(ChameleonConfig()) == {"": ATTENTION}  # its own text config


@torch.no_grad()
def test_load_generic_family_from_a_saved_folder(tmp_path):
    tiny_model("cohere2_vision", "sdpa").save_pretrained(tmp_path)
    Cohere2VisionImageProcessor(size={"height": 28, "width": 28}).save_pretrained(tmp_path)
    words = {"<image>": IMAGE_TOKEN, "<boi>": VISION_START, "<eoi>": VISION_END, "<line_break>": 294}
    named = dict(image_token="<image>", boi_token="<boi>", eoi_token="<eoi>", img_line_break_token="<line_break>")
    tiny_tokenizer(words, **named).save_pretrained(tmp_path)  # Cohere2VisionProcessor reads the named tokens
    lm = load_model(str(tmp_path))
    assert lm.adapter.family == "cohere2_vision" and type(lm.adapter) is GenericAdapter
    assert lm.model.config.text_config._attn_implementation == ATTENTION
    assert lm.model.config.vision_config._attn_implementation == "sdpa"
    inputs = tiny_inputs("cohere2_vision", lm.model)
    image = lm.adapter.image_positions(inputs["input_ids"])
    with probe(lm, read=Read(query_rows="all", groups={"image": image})) as rec:
        lm.model(**inputs)
    assert rec.mass.shape == (2, 3, 4, 1) and bool(((rec.mass >= 0) & (rec.mass <= 1 + 1e-6)).all())


def test_generic_adapter_refuses_a_backbone_outside_the_attention_registry(monkeypatch):
    lm = wrap_model(tiny_model("cohere2_vision", ATTENTION))
    backbone = type(lm.model.model.language_model)
    monkeypatch.setattr(backbone, "_can_set_attn_implementation_cached_value", False, raising=False)  # its verdict
    with pytest.raises(ValueError, match="Cohere2Model does not route attention through transformers' attention"):
        lm.adapter.attention_modules(lm.model)


def test_smolvlm_processor_builds_in_the_pinned_environment():
    """SmolVLM's processor refuses to build without num2words (a pinned requirement for that reason)."""
    from transformers import SmolVLMImageProcessor, SmolVLMProcessor, SmolVLMVideoProcessor

    words = {"<pad>": 0, "<unk>": 1, "<image>": 2, "<fake_token_around_image>": 3, "<global-img>": 4,
             "<end_of_utterance>": 5}  # fmt: skip
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(words, unk_token="<unk>")))
    tokenizer.add_special_tokens({"additional_special_tokens": list(words)[2:]})
    processor = SmolVLMProcessor(
        image_processor=SmolVLMImageProcessor(),
        tokenizer=tokenizer,
        video_processor=SmolVLMVideoProcessor(),
        image_seq_len=4,
    )
    assert processor.image_token_id == 2
