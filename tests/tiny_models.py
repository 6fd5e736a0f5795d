"""Tiny random-weight VLMs of each supported family, built locally (no hub), plus matching inputs.

``tiny_model(family, attn)`` builds a model whose text backbone runs ``attn`` (the vision tower
runs transformers' default, sdpa); the same ``seed`` gives the same weights for every ``attn``, so an
eager oracle and the head-probe engine can be compared. ``tiny_inputs(family, model, lengths)`` gives a left-padded
batch with one image per row (random pixels), as the family's processor would lay it out.
``GENERIC_FAMILIES`` have no hand-written adapter: they run on the generic one.
"""

from __future__ import annotations

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (
    AutoModelForImageTextToText,
    AyaVisionConfig,
    AyaVisionProcessor,
    Cohere2VisionConfig,
    Gemma3Config,
    Gemma3ImageProcessor,
    Gemma3Processor,
    Gemma4Config,
    Glm4vConfig,
    Glm4vImageProcessor,
    Glm4vProcessor,
    Glm4vVideoProcessor,
    GotOcr2ImageProcessor,
    Idefics3Config,
    Idefics3ImageProcessor,
    Idefics3Processor,
    InternVLConfig,
    InternVLProcessor,
    InternVLVideoProcessor,
    Lfm2VlConfig,
    Lfm2VlImageProcessor,
    Lfm2VlProcessor,
    LlavaConfig,
    LlavaNextConfig,
    LlavaNextImageProcessor,
    LlavaNextProcessor,
    LlavaOnevisionConfig,
    LlavaOnevisionImageProcessor,
    LlavaOnevisionProcessor,
    LlavaOnevisionVideoProcessor,
    Mistral3Config,
    Molmo2Config,
    Molmo2ImageProcessor,
    Molmo2Processor,
    Molmo2VideoProcessor,
    Ovis2Config,
    Ovis2ImageProcessor,
    Ovis2Processor,
    PaliGemmaConfig,
    PaliGemmaProcessor,
    PixtralImageProcessor,
    PixtralProcessor,
    PreTrainedTokenizerFast,
    Qwen2_5_VLConfig,
    Qwen2VLConfig,
    Qwen2VLImageProcessor,
    Qwen3_5Config,
    Qwen3VLConfig,
    Qwen3VLMoeConfig,
    Qwen3VLProcessor,
    Qwen3VLVideoProcessor,
    SiglipImageProcessor,
    SmolVLMConfig,
    SmolVLMImageProcessor,
    SmolVLMProcessor,
    SmolVLMVideoProcessor,
)

from helpers.engine.loading import attn_implementation_for

VOCAB = 300
IMAGE_TOKEN, VIDEO_TOKEN, VISION_START, VISION_END, PAD, EOS = 290, 291, 292, 293, 0, 4

TEXT = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    pad_token_id=PAD,
    bos_token_id=1,
    eos_token_id=2,
)


def _qwen3_vl(config_class=Qwen3VLConfig, **text) -> Qwen3VLConfig:
    return config_class(
        text_config=dict(
            TEXT,
            **text,
            rope_parameters={
                "rope_type": "default",
                "rope_theta": 10000.0,
                "mrope_section": [2, 3, 3],
                "mrope_interleaved": True,
            },
        ),
        vision_config=dict(
            depth=2,
            hidden_size=32,
            intermediate_size=64,
            num_heads=2,
            out_hidden_size=64,
            patch_size=16,
            spatial_merge_size=2,
            temporal_patch_size=2,
            num_position_embeddings=64,
            deepstack_visual_indexes=[0],
        ),
        image_token_id=IMAGE_TOKEN,
        video_token_id=VIDEO_TOKEN,
        vision_start_token_id=VISION_START,
        vision_end_token_id=VISION_END,
    )


def _qwen3_5() -> Qwen3_5Config:
    """Two linear-attention (gated delta net) layers and two softmax-attention layers (the candidates)."""
    return Qwen3_5Config(
        text_config=dict(
            TEXT,
            num_hidden_layers=4,
            layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
            linear_conv_kernel_dim=4,
            linear_key_head_dim=8,
            linear_value_head_dim=8,
            linear_num_key_heads=2,
            linear_num_value_heads=4,
            rope_parameters={
                "rope_type": "default",
                "rope_theta": 10000.0,
                "partial_rotary_factor": 0.5,
                "mrope_section": [2, 1, 1],
                "mrope_interleaved": True,
            },
        ),
        vision_config=dict(
            depth=2,
            hidden_size=32,
            intermediate_size=64,
            num_heads=2,
            out_hidden_size=64,
            patch_size=16,
            spatial_merge_size=2,
            temporal_patch_size=2,
            num_position_embeddings=64,
        ),
        image_token_id=IMAGE_TOKEN,
        video_token_id=VIDEO_TOKEN,
        vision_start_token_id=VISION_START,
        vision_end_token_id=VISION_END,
    )


def _internvl() -> InternVLConfig:
    """One 56 x 56 tile: 8 x 8 patches, pixel-shuffled to a 4 x 4 token grid."""
    return InternVLConfig(
        text_config=dict(TEXT, model_type="qwen2"),
        vision_config=dict(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            image_size=[56, 56],
            patch_size=[7, 7],
        ),
        image_token_id=IMAGE_TOKEN,
        image_seq_length=16,
        downsample_ratio=0.5,
    )


def _qwen2_vl(config_class) -> Qwen2VLConfig:
    return config_class(
        text_config=dict(
            TEXT, rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}
        ),
        vision_config=dict(
            depth=2,
            embed_dim=32,
            hidden_size=64,
            num_heads=2,
            patch_size=14,
            spatial_merge_size=2,
            temporal_patch_size=2,
            out_hidden_size=64,
            intermediate_size=64,
        ),
        image_token_id=IMAGE_TOKEN,
        video_token_id=VIDEO_TOKEN,
        vision_start_token_id=VISION_START,
        vision_end_token_id=VISION_END,
    )


def _glm4v() -> Glm4vConfig:
    """GLM-4V: Qwen2-VL's patch layout (14 px patches, merged 2 x 2 by a strided convolution), half-rotary mrope."""
    rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [1, 1, 2], "partial_rotary_factor": 0.5}
    return Glm4vConfig(
        text_config=dict(TEXT, rope_parameters=rope),
        vision_config=dict(
            depth=2,
            hidden_size=32,
            intermediate_size=64,
            num_heads=2,
            out_hidden_size=64,
            patch_size=14,
            spatial_merge_size=2,
            temporal_patch_size=2,
            image_size=56,
        ),
        image_token_id=IMAGE_TOKEN,
        video_token_id=VIDEO_TOKEN,
        image_start_token_id=VISION_START,
        image_end_token_id=VISION_END,
    )


def _gemma3() -> Gemma3Config:
    return Gemma3Config(
        text_config=dict(
            TEXT,
            sliding_window=8,
            query_pre_attn_scalar=16,
            layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        ),
        vision_config=dict(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            image_size=64,
            patch_size=8,
        ),
        mm_tokens_per_image=4,
        image_token_index=IMAGE_TOKEN,
        boi_token_index=VISION_START,
        eoi_token_index=VISION_END,
    )


def _gemma4() -> Gemma4Config:
    """Per-layer inputs, a sliding layer, and a full layer that reuses the previous full layer's keys and values."""
    return Gemma4Config(
        text_config=dict(
            TEXT,
            sliding_window=8,
            layer_types=["sliding_attention", "full_attention", "full_attention"],
            global_head_dim=16,
            num_kv_shared_layers=1,
            hidden_size_per_layer_input=8,
            vocab_size_per_layer_input=VOCAB,
        ),
        vision_config=dict(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
            head_dim=16,
            patch_size=8,
            pooling_kernel_size=2,
            position_embedding_size=64,
        ),
        audio_config=None,
        image_token_id=IMAGE_TOKEN,
        boi_token_id=VISION_START,
        eoi_token_id=VISION_END,
        video_token_id=VIDEO_TOKEN,
    )


def _llava() -> LlavaConfig:
    return LlavaConfig(
        text_config=dict(TEXT, model_type="llama"),
        vision_config=dict(
            model_type="clip_vision_model",
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            image_size=28,
            patch_size=7,
            projection_dim=32,
        ),
        image_token_index=IMAGE_TOKEN,
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
    )


VISION = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2)


def _paligemma() -> PaliGemmaConfig:
    """SigLIP on 28 x 28 images (4 x 4 patches of 7 px: 16 image tokens), Gemma text backbone."""
    return PaliGemmaConfig(
        text_config=dict(TEXT, model_type="gemma"),
        vision_config=dict(VISION, image_size=28, patch_size=7),
        image_token_index=IMAGE_TOKEN,
        projection_dim=64,
        hidden_size=64,
    )


def _mistral3(image_size: int = 28) -> Mistral3Config:
    """Pixtral on a 28 x 28 image (4 x 4 patches of 7 px, merged 2 x 2: 4 image tokens), Mistral text backbone;
    ``image_size``: the largest image edge the tower's position embedding takes."""
    return Mistral3Config(
        text_config=dict(TEXT, model_type="mistral"),
        vision_config=dict(VISION, model_type="pixtral", image_size=image_size, patch_size=7, head_dim=16),
        image_token_index=IMAGE_TOKEN,
        spatial_merge_size=2,
    )


def _idefics3() -> Idefics3Config:
    """One 28 x 28 image (4 x 4 patches, pixel-shuffled by 2: 4 image tokens); the text backbone: model.text_model."""
    return Idefics3Config(
        text_config=dict(TEXT, model_type="llama"),
        vision_config=dict(VISION, image_size=28, patch_size=7),
        image_token_id=IMAGE_TOKEN,
        scale_factor=2,
    )


def _aya_vision() -> AyaVisionConfig:
    """SigLIP (4 x 4 patches, downsampled by 2: 4 image tokens), Cohere 2 text backbone with sliding-window layers."""
    return AyaVisionConfig(
        text_config=dict(
            TEXT,
            model_type="cohere2",
            sliding_window=8,
            layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        ),
        vision_config=dict(VISION, model_type="siglip_vision_model", image_size=28, patch_size=7),
        image_token_index=IMAGE_TOKEN,
        downsample_factor=2,
    )


def _cohere2_vision() -> Cohere2VisionConfig:
    """Command A Vision: as Aya Vision (SigLIP, 4 x 4 patches downsampled by 2: 4 image tokens, Cohere 2 text
    backbone); no hand-written adapter, so the generic adapter's tests run on it."""
    return Cohere2VisionConfig(
        text_config=dict(
            TEXT,
            model_type="cohere2",
            sliding_window=8,
            layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        ),
        vision_config=dict(VISION, model_type="siglip_vision_model", image_size=28, patch_size=7),
        image_token_id=IMAGE_TOKEN,
        downsample_factor=2,
        alignment_intermediate_size=64,
    )


def _lfm2_vl() -> Lfm2VlConfig:
    """SigLIP 2 (4 x 4 patches, downsampled by 2: 4 image tokens), LFM2 text backbone: layer 0 is a convolution."""
    return Lfm2VlConfig(
        text_config=dict(TEXT, model_type="lfm2", layer_types=["conv", "full_attention", "full_attention"]),
        vision_config=dict(VISION, model_type="siglip2_vision_model", patch_size=7, num_patches=16),
        image_token_id=IMAGE_TOKEN,
        downsample_factor=2,
    )


def _ovis2() -> Ovis2Config:
    """Ovis 2's vision tower on a 28 x 28 image (4 x 4 patches of 7 px, strided by 2: 4 image tokens), each
    token a softmax over a 32-entry visual vocabulary; Qwen2 text backbone. The start and end tokens around the
    image are its visual indicator tokens: their embeddings are rows of the visual embedding table when the
    pixels are given (the processor's <IMG_START> and <IMG_END>)."""
    return Ovis2Config(
        text_config=dict(TEXT, model_type="qwen2"),
        vision_config=dict(
            VISION, image_size=28, patch_size=7, hidden_stride=2, vocab_size=32, num_visual_indicator_tokens=2
        ),
        image_token_id=IMAGE_TOKEN,
        visual_indicator_token_ids=[VISION_START, VISION_END],
        vocab_size=VOCAB,
        hidden_size=TEXT["hidden_size"],
    )


def _molmo2() -> Molmo2Config:
    """Molmo 2's vision tower on 35 x 35 crops (5 x 5 patches of 7 px), one feature layer, pooled 2 x 2 by the
    adapter's attention (the 5 x 5 grid padded to 6 x 6: 9 tokens); Qwen3-style text backbone."""
    return Molmo2Config(
        text_config=dict(TEXT, additional_vocab_size=0),
        vision_config=dict(VISION, num_key_value_heads=2, head_dim=16, image_size=[35, 35], patch_size=7),
        adapter_config=dict(
            hidden_size=32,
            num_attention_heads=2,
            num_key_value_heads=2,
            head_dim=16,
            intermediate_size=64,
            text_hidden_size=TEXT["hidden_size"],
            vision_feature_layer=[-1],
        ),  # fmt: skip
        image_patch_id=IMAGE_TOKEN,
        image_start_token_id=VISION_START,
        image_end_token_id=VISION_END,
        low_res_image_start_token_id=294,
    )


CONFIGS = {
    "qwen3_vl": _qwen3_vl,
    "qwen3_vl_moe": lambda: _qwen3_vl(  # 4 experts of which 2 per token, every layer sparse
        Qwen3VLMoeConfig, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, decoder_sparse_step=1
    ),
    "qwen2_vl": lambda: _qwen2_vl(Qwen2VLConfig),
    "qwen2_5_vl": lambda: _qwen2_vl(Qwen2_5_VLConfig),
    "qwen3_5": _qwen3_5,
    "gemma3": _gemma3,
    "gemma4": _gemma4,
    "llava": _llava,
    "internvl": _internvl,
    "paligemma": _paligemma,
    "mistral3": _mistral3,
    "idefics3": _idefics3,
    "aya_vision": _aya_vision,
    "lfm2_vl": _lfm2_vl,
    "ovis2": _ovis2,
    "glm4v": _glm4v,
    "cohere2_vision": _cohere2_vision,
    "molmo2": _molmo2,
}
QWEN_FAMILIES = ("qwen3_vl", "qwen3_vl_moe", "qwen2_vl", "qwen2_5_vl", "qwen3_5", "glm4v")  # patch grids, merged
GENERIC_FAMILIES = ("cohere2_vision",)


def tiny_model(family: str, attn: str, seed: int = 0):
    """A tiny random model of ``family``; its text backbone runs ``attn``, its vision tower sdpa (the default)."""
    config = CONFIGS[family]()
    torch.manual_seed(seed)
    model = AutoModelForImageTextToText.from_config(config, attn_implementation=attn_implementation_for(config, attn))
    return model.eval()


def _image_tokens(family: str, config, grid: tuple[int, int] = (4, 6)) -> tuple[int, dict]:
    """Tokens per image and the pixel inputs of one random image, as the family's processor lays them out.

    ``grid``: the image's patch grid (rows, columns), for the Qwen families (dynamic resolution)."""
    vision = config.vision_config
    if family in QWEN_FAMILIES:
        grid_h, grid_w = grid  # patches
        patch_dim = 3 * vision.temporal_patch_size * vision.patch_size**2
        pixels = {
            "pixel_values": torch.randn(grid_h * grid_w, patch_dim),
            "image_grid_thw": torch.tensor([[1, grid_h, grid_w]]),
        }
        return grid_h * grid_w // vision.spatial_merge_size**2, pixels
    if family == "gemma3":
        return config.mm_tokens_per_image, {"pixel_values": torch.randn(1, 3, vision.image_size, vision.image_size)}
    if family == "llava":
        return (vision.image_size // vision.patch_size) ** 2, {
            "pixel_values": torch.randn(1, 3, vision.image_size, vision.image_size)
        }
    if family == "gemma4":  # 4 x 6 patches of 8 px, pooled 2 x 2: a 2 x 3 token grid, row-major
        rows, cols = 4, 6
        positions = torch.stack(torch.meshgrid(torch.arange(cols), torch.arange(rows), indexing="xy"), -1)
        patch_dim = 3 * vision.patch_size**2
        return rows * cols // vision.pooling_kernel_size**2, {
            "pixel_values": torch.randn(1, rows * cols, patch_dim),
            "image_position_ids": positions.reshape(1, -1, 2),
        }
    if family == "internvl":
        return config.image_seq_length, {"pixel_values": torch.randn(1, 3, *vision.image_size)}
    if family == "molmo2":  # a 35 x 35 image: the low-res view and one crop, 9 pooled tokens each
        pixels = dict(_molmo2_image_processor()(torch.randint(0, 256, (3, 35, 35), dtype=torch.uint8)))
        return int(pixels["image_grids"][0].view(2, 2).prod(1).sum()), pixels
    if family == "lfm2_vl":  # flattened patches [batch, patches, 3 p p] and their grid (patches per edge)
        edge = int(vision.num_patches**0.5)
        return (edge // config.downsample_factor) ** 2, {
            "pixel_values": torch.randn(1, edge**2, 3 * vision.patch_size**2),
            "spatial_shapes": torch.tensor([[edge, edge]]),
            "pixel_attention_mask": torch.ones(1, edge**2, dtype=torch.long),
        }
    side = vision.image_size
    patches = side // vision.patch_size  # per edge
    if family == "paligemma":
        return patches**2, {"pixel_values": torch.randn(1, 3, side, side)}
    if family == "mistral3":
        return (patches // config.spatial_merge_size) ** 2, {
            "pixel_values": torch.randn(1, 3, side, side),
            "image_sizes": torch.tensor([[side, side]]),
        }
    if family == "idefics3":  # [batch, images, 3, H, W]
        return patches**2 // config.scale_factor**2, {"pixel_values": torch.randn(1, 1, 3, side, side)}
    if family == "ovis2":
        return patches**2 // vision.hidden_stride**2, {"pixel_values": torch.randn(1, 3, side, side)}
    if family in ("aya_vision", "cohere2_vision"):
        return (patches // config.downsample_factor) ** 2, {"pixel_values": torch.randn(1, 3, side, side)}
    raise ValueError(f"no tiny inputs for {family!r}")


def tiny_inputs(family: str, model, lengths=(5, 3), seed: int = 1, n_images: int = 1, grids=None) -> dict:
    """Left-padded batch: row i = [prefix text] ([start] image [end] [4 text tokens]) x n_images, prefix lengths
    ``lengths``. Every image is the same random one unless ``grids`` (Qwen families) gives each row's patch grid
    (rows, columns), so that rows hold images of different sizes."""
    generator = torch.Generator().manual_seed(seed)
    grids = grids or [(4, 6)] * len(lengths)
    by_grid = {grid: _image_tokens(family, model.config, grid) for grid in dict.fromkeys(grids)}
    images = [by_grid[grid] for grid in grids]  # one per batch row
    rows = []
    for prefix, (n_image, _) in zip(lengths, images):
        row = torch.randint(1, 250, (prefix,), generator=generator).tolist()
        for _ in range(n_images):
            after = torch.randint(1, 250, (4,), generator=generator).tolist()
            row += [VISION_START] + [IMAGE_TOKEN] * n_image + [VISION_END] + after
        rows.append(row)
    width = max(len(r) for r in rows)
    input_ids = torch.tensor([[PAD] * (width - len(r)) + r for r in rows])
    attention_mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
    for name in images[0][1]:  # each row's image n_images times, rows in order
        inputs[name] = torch.cat([pixels[name] for _, pixels in images for _ in range(n_images)])
    if family in QWEN_FAMILIES or family == "molmo2":  # Molmo 2's processor marks its image markers too
        inputs["mm_token_type_ids"] = (input_ids == IMAGE_TOKEN).long()
    if family == "gemma3":
        inputs["token_type_ids"] = (input_ids == IMAGE_TOKEN).long()
    if family == "molmo2":  # each image's pooling indices point into its own crops' patches
        image = images[0][1]  # every image is the same one
        n_tokens, n_patches = len(image["image_token_pooling"]), image["pixel_values"].shape[:2].numel()
        offsets = torch.arange(len(rows) * n_images).repeat_interleave(n_tokens) * n_patches  # [tokens]
        pooling = inputs["image_token_pooling"]  # [tokens, pool_h * pool_w], -1: padding
        inputs["image_token_pooling"] = torch.where(pooling >= 0, pooling + offsets[:, None], -1)
    return inputs


def tiny_tokenizer(words: dict[str, int], **named) -> PreTrainedTokenizerFast:
    """A word-level tokenizer (text split at whitespace and punctuation) whose words are the option letters A..D,
    <eos> and the special tokens ``words`` (token -> id; other words are <unk>); ``named``: extra special tokens
    the processor reads as attributes (start_image_token="<img>", ...)."""
    letters = {letter: 10 + i for i, letter in enumerate("ABCD")}
    vocabulary = {"<pad>": PAD, "<unk>": 1, "<eos>": EOS, **letters, **words}
    backend = Tokenizer(models.WordLevel(vocabulary, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        unk_token="<unk>",
        eos_token="<eos>",
        extra_special_tokens=named,
    )
    tokenizer.add_special_tokens({"additional_special_tokens": list(words)}, replace_extra_special_tokens=False)
    return tokenizer


def _internvl_processor() -> InternVLProcessor:
    """The InternVL processor (dynamic tiling on, its default) on 56 x 56 tiles, 16 tokens per tile."""
    words = {"<IMG_CONTEXT>": IMAGE_TOKEN, "<video>": VIDEO_TOKEN, "<img>": VISION_START, "</img>": VISION_END}
    tokenizer = tiny_tokenizer(
        words, start_image_token="<img>", end_image_token="</img>", context_image_token="<IMG_CONTEXT>",
        video_token="<video>",
    )  # fmt: skip
    image_processor = GotOcr2ImageProcessor(size={"height": 56, "width": 56}, resample=NEAREST)
    return InternVLProcessor(image_processor, tokenizer, InternVLVideoProcessor(), image_seq_length=16)


def _llava_next() -> LlavaNextConfig:
    """CLIP on 28 x 28 tiles (4 x 4 patches of 7 px, CLS dropped); canvases of 1 x 2 .. 3 x 3 tiles."""
    return LlavaNextConfig(
        text_config=dict(TEXT, model_type="llama"),
        vision_config=dict(VISION, model_type="clip_vision_model", image_size=28, patch_size=7, projection_dim=32),
        image_token_index=IMAGE_TOKEN,
        image_grid_pinpoints=PINPOINTS,
        vision_feature_layer=-1,
    )


def _llava_onevision(max_tiles: int = 9) -> LlavaOnevisionConfig:
    """SigLIP on 28 x 28 tiles (4 x 4 patches of 7 px); canvases of 1 x 2 .. 3 x 3 tiles, a grid of more than about
    ``max_tiles`` tiles' tokens shrunk (anyres_max_<max_tiles>; the default 9: never)."""
    return LlavaOnevisionConfig(
        text_config=dict(TEXT, model_type="qwen2"),
        vision_config=dict(VISION, model_type="siglip_vision_model", image_size=28, patch_size=7),
        image_token_index=IMAGE_TOKEN,
        video_token_index=VIDEO_TOKEN,
        image_grid_pinpoints=PINPOINTS,
        vision_feature_layer=-1,
        vision_aspect_ratio=f"anyres_max_{max_tiles}",
    )


PINPOINTS = [[28, 56], [56, 28], [56, 56], [28, 84], [84, 28], [56, 84], [84, 56], [84, 84]]  # (height, width)


def _smolvlm() -> SmolVLMConfig:
    """As Idefics3: 28 x 28 tiles (4 x 4 patches, pixel-shuffled by 2: 4 image tokens per tile)."""
    return SmolVLMConfig(
        text_config=dict(TEXT, model_type="llama"),
        vision_config=dict(VISION, image_size=28, patch_size=7),
        image_token_id=IMAGE_TOKEN,
        scale_factor=2,
    )


TILING_CONFIGS = {
    "llava_next": _llava_next,
    "llava_onevision": _llava_onevision,
    "smolvlm": _smolvlm,
}  # region mapping tests only


def _llava_pixtral() -> LlavaConfig:
    """LLaVA with a Pixtral tower (as Pixtral 12B): native resolution up to 28 x 28 (4 x 4 patches of 7 px), one
    token per patch, all tokens kept (strategy 'full')."""
    return LlavaConfig(
        text_config=dict(TEXT, model_type="mistral"),
        vision_config=dict(VISION, model_type="pixtral", image_size=28, patch_size=7, head_dim=16),
        image_token_index=IMAGE_TOKEN,
        vision_feature_layer=-1,
        vision_feature_select_strategy="full",
    )


REGION_CONFIGS = {  # the region mapping tests' models, by test case (a family, or a family with a processor setting)
    **CONFIGS,
    **TILING_CONFIGS,
    "gemma3_pan_and_scan": _gemma3,
    "mistral3": lambda: _mistral3(image_size=56),  # images of up to 8 x 8 patches
    "llava_pixtral": _llava_pixtral,
    "llava_onevision_shrunk": lambda: _llava_onevision(max_tiles=1),  # anyres_max_1: grids over 1.21 tiles shrink
}


def _llava_next_processor() -> LlavaNextProcessor:
    image_processor = LlavaNextImageProcessor(
        size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28}, image_grid_pinpoints=PINPOINTS,
        resample=NEAREST,
    )  # fmt: skip
    tokenizer = tiny_tokenizer({"<image>": IMAGE_TOKEN})
    return LlavaNextProcessor(
        image_processor,
        tokenizer,
        patch_size=7,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
    )


def _llava_onevision_processor(max_tiles: int = 9) -> LlavaOnevisionProcessor:
    image_processor = LlavaOnevisionImageProcessor(
        size={"height": 28, "width": 28}, image_grid_pinpoints=PINPOINTS, resample=NEAREST
    )
    tokenizer = tiny_tokenizer({"<image>": IMAGE_TOKEN, "<video>": VIDEO_TOKEN})
    return LlavaOnevisionProcessor(
        image_processor, tokenizer, LlavaOnevisionVideoProcessor(), num_image_tokens=16,
        vision_feature_select_strategy="full", vision_aspect_ratio=f"anyres_max_{max_tiles}",
    )  # fmt: skip


SPLIT_WORDS = {  # Idefics3 and SmolVLM: the tokens around each tile's image tokens
    "<image>": IMAGE_TOKEN, "<fake_token_around_image>": VISION_START, "<global-img>": VISION_END,
    "<end_of_utterance>": 2,
    **{f"<row_{r}_col_{c}>": 200 + 10 * r + c for r in range(1, 7) for c in range(1, 7)},
}  # fmt: skip


def _split_image_processor(family: str):
    """Idefics3's or SmolVLM's processor (image splitting on, its default): longest edge 56, tiles of 28 px."""
    sizes = dict(size={"longest_edge": 56}, max_image_size={"longest_edge": 28}, resample=NEAREST)
    tokenizer = tiny_tokenizer(SPLIT_WORDS)
    if family == "idefics3":
        return Idefics3Processor(Idefics3ImageProcessor(**sizes), tokenizer, image_seq_len=4)
    return SmolVLMProcessor(SmolVLMImageProcessor(**sizes), tokenizer, SmolVLMVideoProcessor(), image_seq_len=4)


def _gemma3_processor(pan_and_scan: bool = False) -> Gemma3Processor:
    """Gemma 3's processor on 64 x 64 pictures (4 tokens each); ``pan_and_scan``: its defaults cut an image of
    aspect ratio 1.2 or more into 2..4 crops of at least 32 px (a Gemma3Processor's images_kwargs win over its
    image processor's attributes, as at call time)."""
    words = {"<image_soft_token>": IMAGE_TOKEN, "<start_of_image>": VISION_START, "<end_of_image>": VISION_END}
    tokenizer = tiny_tokenizer(
        words, image_token="<image_soft_token>", boi_token="<start_of_image>", eoi_token="<end_of_image>"
    )
    processor = Gemma3Processor(
        Gemma3ImageProcessor(size={"height": 64, "width": 64}, resample=NEAREST), tokenizer, image_seq_length=4
    )
    if pan_and_scan:
        processor.images_kwargs = {
            **processor.images_kwargs, "do_pan_and_scan": True, "pan_and_scan_min_crop_size": 32,
        }  # fmt: skip
    return processor


def _paligemma_processor() -> PaliGemmaProcessor:
    """PaliGemma's processor: the image resized onto 28 x 28 (16 tokens), the image tokens before <bos>."""
    image_processor = SiglipImageProcessor(size={"height": 28, "width": 28}, resample=NEAREST)
    image_processor.image_seq_length = 16
    return PaliGemmaProcessor(image_processor, tiny_tokenizer({"<image>": IMAGE_TOKEN, "<bos>": 3}, bos_token="<bos>"))


def _pixtral_processor(longest_edge: int = 56, merge: int = 2) -> PixtralProcessor:
    """Mistral 3's (Pixtral's) processor: longest edge 56, cells of 14 px (7 px patches merged 2 x 2); [IMG_BREAK]
    after each row of image tokens, [IMG_END] after the last. LLaVA-Pixtral's: longest edge 28, no merging."""
    words = {"[IMG]": IMAGE_TOKEN, "[IMG_BREAK]": VISION_START, "[IMG_END]": VISION_END}
    image_processor = PixtralImageProcessor(size={"longest_edge": longest_edge}, patch_size=7, resample=NEAREST)
    return PixtralProcessor(image_processor, tiny_tokenizer(words), patch_size=7, spatial_merge_size=merge)


def _aya_vision_processor() -> AyaVisionProcessor:
    """Aya Vision's processor (tiling on, its default): 28 x 28 tiles of 4 tokens (7 px patches, downsampled by 2),
    the thumbnail last; a TILE_<k> marker before each tile's tokens, TILE_GLOBAL before the thumbnail's."""
    words = {"<|IMG_PATCH|>": IMAGE_TOKEN, "<|START_OF_IMG|>": VISION_START, "<|END_OF_IMG|>": VISION_END,
             "TILE": 294, "TILE_GLOBAL": 295, "<|IMG_LINE_BREAK|>": 296}  # fmt: skip
    image_processor = GotOcr2ImageProcessor(size={"height": 28, "width": 28}, resample=NEAREST)
    return AyaVisionProcessor(image_processor, tiny_tokenizer(words), patch_size=7, img_size=28, downsample_factor=2)


def _ovis2_processor() -> Ovis2Processor:
    """Ovis 2's processor with tiling on (crop_to_patches, as Ovis 2 checkpoints ship it): 28 x 28 tiles of 4 tokens,
    the thumbnail first; <IMG_START>, <IMG_GRID>, <IMG_COL>, <IMG_ROW> and <IMG_END> around the runs."""
    words = {"<IMG_ATOM>": IMAGE_TOKEN, "<IMG_START>": VISION_START, "<IMG_END>": VISION_END, "<IMG_GRID>": 294,
             "<IMG_COL>": 295, "<IMG_ROW>": 296, "<image>": 297}  # fmt: skip
    image_processor = Ovis2ImageProcessor(size={"height": 28, "width": 28}, crop_to_patches=True, resample=NEAREST)
    return Ovis2Processor(image_processor, tiny_tokenizer(words), image_seq_length=4)


def _lfm2_vl_processor() -> Lfm2VlProcessor:
    """LFM2-VL's processor on 7 px patches downsampled by 2: an image of at most about 2 x 9 tokens' pixels is one
    picture of at most 9 tokens, a larger one 2..6 tiles of 28 px (4 tokens each) and the thumbnail."""
    words = {"<image>": IMAGE_TOKEN, "<|image_start|>": VISION_START, "<|image_end|>": VISION_END,
             "<|img_thumbnail|>": 294}  # fmt: skip
    image_processor = Lfm2VlImageProcessor(
        encoder_patch_size=7, downsample_factor=2, tile_size=28, min_tiles=2, max_tiles=6, min_image_tokens=1,
        max_image_tokens=9, resample=NEAREST,
    )  # fmt: skip
    return Lfm2VlProcessor(image_processor, tiny_tokenizer(words))


def _glm4v_processor() -> Glm4vProcessor:
    """GLM-4V's processor: the image resized (aspect kept) to whole 28 px cells, at least 112 x 112 pixels."""
    words = {"<|image|>": IMAGE_TOKEN, "<|begin_of_image|>": VISION_START, "<|end_of_image|>": VISION_END,
             "<|video|>": VIDEO_TOKEN, "<|begin_of_video|>": 294, "<|end_of_video|>": 295}  # fmt: skip
    image_processor = Glm4vImageProcessor(
        patch_size=14, merge_size=2, temporal_patch_size=2, resample=NEAREST,
        size={"shortest_edge": 112 * 112, "longest_edge": 28 * 28 * 64},
    )  # fmt: skip
    return Glm4vProcessor(image_processor, tiny_tokenizer(words), Glm4vVideoProcessor())


def _qwen3_vl_processor() -> Qwen3VLProcessor:
    """Qwen3-VL's processor (its MoE sibling's too): the image resized (aspect kept) to whole 32 px cells."""
    words = {"<|image_pad|>": IMAGE_TOKEN, "<|vision_start|>": VISION_START, "<|vision_end|>": VISION_END,
             "<|video_pad|>": VIDEO_TOKEN}  # fmt: skip
    image_processor = Qwen2VLImageProcessor(
        patch_size=16, merge_size=2, temporal_patch_size=2, resample=NEAREST,
        size={"shortest_edge": 64 * 64, "longest_edge": 32 * 32 * 64},
    )  # fmt: skip
    return Qwen3VLProcessor(image_processor, tiny_tokenizer(words), Qwen3VLVideoProcessor())


def _molmo2_image_processor() -> Molmo2ImageProcessor:
    """35 px crops of 7 px patches overlapping by 1 patch on each side (windows of 21 px), at most 4 crops."""
    return Molmo2ImageProcessor(
        size={"height": 35, "width": 35}, patch_size=7, overlap_margins=[1, 1], max_crops=4, resample=NEAREST
    )


def _molmo2_processor() -> Molmo2Processor:
    """Molmo 2's processor: the low-res view (a 3 x 3 token grid) then the high-res crops' grid, <im_col> after each
    row of image tokens; <|image|> in the text stands for the image."""
    words = {"<im_patch>": IMAGE_TOKEN, "<im_start>": VISION_START, "<im_end>": VISION_END, "<low_res_im_start>": 294,
             "<im_col>": 295, "<|image|>": 296, "<|video|>": 297, "<frame_start>": 298, "<frame_end>": 299,
             "<im_low>": 289}  # fmt: skip
    tokenizer = tiny_tokenizer(words, image_token="<|image|>", video_token="<|video|>", bos_token="<eos>")
    return Molmo2Processor(_molmo2_image_processor(), Molmo2VideoProcessor(), tokenizer)


PROCESSORS = {
    "gemma3": _gemma3_processor,
    "gemma3_pan_and_scan": lambda: _gemma3_processor(pan_and_scan=True),
    "paligemma": _paligemma_processor,
    "mistral3": _pixtral_processor,
    "llava_pixtral": lambda: _pixtral_processor(longest_edge=28, merge=1),
    "idefics3": lambda: _split_image_processor("idefics3"),
    "smolvlm": lambda: _split_image_processor("smolvlm"),
    "internvl": _internvl_processor,
    "llava_next": _llava_next_processor,
    "llava_onevision": _llava_onevision_processor,
    "llava_onevision_shrunk": lambda: _llava_onevision_processor(max_tiles=1),
    "aya_vision": _aya_vision_processor,
    "ovis2": _ovis2_processor,
    "lfm2_vl": _lfm2_vl_processor,
    "glm4v": _glm4v_processor,
    "molmo2": _molmo2_processor,
    "qwen3_vl_moe": _qwen3_vl_processor,
}
NEAREST = 0  # PIL's NEAREST: resizing moves no pixel's value into a neighbouring cell


def tiny_processor(family: str):
    """The family's processor, built locally for its tiny model (nearest resampling); its image token is "<image>"
    or the family's own (``processor.image_token``)."""
    return PROCESSORS[family]()


def local_vision(model):
    """``model`` with its vision tower's attention outputs zeroed (each attention module's output projection), so
    that each image token's features depend only on its own patches' pixels (patch and position embeddings,
    per-token layers, the projector), as region mapping tests need. A tower of no layers would do the same, but
    transformers then records no hidden states for the feature layer to pick from."""
    zeroed = 0
    for name, module in model.named_modules():
        if ("vision" in name or "visual" in name) and type(module).__name__.endswith("Attention"):
            for attribute in ("out_proj", "o_proj", "projection_layer", "proj"):
                if hasattr(module, attribute):
                    torch.nn.init.zeros_(getattr(module, attribute).weight)
                    zeroed += 1
    assert zeroed, f"no vision attention output projection found in {type(model).__name__}"
    return model
