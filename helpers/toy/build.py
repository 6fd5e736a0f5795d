"""Build the toy models' tokenizer, chat template, processor and config from scratch (nothing from a hub).

One builder per family (FAMILIES): the shipped toy is a Qwen3-VL; `qwen2_vl` and `llava` are the extra toys
trained by the same entry point (`python -m helpers.toy.train --family ...`). The Qwen3-VL toy:

- tokenizer: a byte-level BPE trained with `tokenizers` on the task prompts and answers, with the same
  pre-tokenizer regex as Qwen's, wrapped as `Qwen2Tokenizer` and given Qwen's special tokens;
- chat template: Qwen's message format (<|im_start|>role ... <|im_end|>, images as
  <|vision_start|><|image_pad|><|vision_end|>), written here;
- processor: `Qwen3VLProcessor` with an image processor sized for small images (patch 16, merge 4,
  i.e. one image token per 64x64 pixels: one per strip panel, grid cell or single image; merge 2 for the
  graded toys, 2 x 2 tokens each) and the video processor it requires;
- config: `Qwen3VLConfig`, 8 text layers x 16 query heads (4 key/value heads, head_dim 32), a 4-block
  vision tower of width 64 (its patch merger sees a whole panel's 4x4 patches) with one deepstack layer.
"""

from __future__ import annotations

import json

from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers, trainers
from tokenizers.models import BPE
from transformers import (
    CLIPImageProcessor,
    CLIPVisionConfig,
    LlamaConfig,
    LlavaConfig,
    LlavaProcessor,
    Qwen2Tokenizer,
    Qwen2VLConfig,
    Qwen2VLImageProcessor,
    Qwen2VLProcessor,
    Qwen2VLVideoProcessor,
    Qwen3VLConfig,
    Qwen3VLProcessor,
    Qwen3VLVideoProcessor,
)

from helpers.stimuli.corpora import SyntheticCorpus
from helpers.toy.tasks import ALL_KINDS, build_task_items

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]
FAMILIES = ("qwen3_vl", "qwen2_vl", "llava")
LLAVA_IMAGE_TOKEN = "<image>"  # LLaVA's placeholder, expanded by its processor to one token per patch
QWEN_IMAGE = "<|vision_start|><|image_pad|><|vision_end|>"
# LLaVA toy: a CLIP tower on 192 x 192 images (every stimulus is resized onto the square, not cropped) with
# 32-px patches: a 6 x 6 token grid, so a strip panel is 2 x 3 tokens, a grid cell 3 x 3, a single image 36.
LLAVA_IMAGE_SIZE, LLAVA_PATCH = 192, 32
# Qwen's pre-tokenizer split: contractions, letter runs with one leading non-letter, single digits,
# punctuation runs, newlines, spaces.
QWEN_SPLIT_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
BPE_VOCAB_SIZE = 400  # bytes (256) + merges; most task words end up as one or two tokens
PATCH_SIZE, MERGE_SIZE, TEMPORAL_PATCH = 16, 4, 2
# The graded toys' merge: Qwen3-VL's own 2 x 2, so a 64-px panel, cell or single image is 2 x 2 tokens.
MERGE_SIZES = (MERGE_SIZE, 2)
MIN_PIXELS, MAX_PIXELS = 64 * 64, 512 * 512  # one to 64 image tokens; our stimuli are 64-192 px
# The depth recipe's settings as every toy before it was trained (train.py --image-word-layer, --image-word-weight,
# --layer-image-drop, --option-smoothing): image words at the input, no layer image drop, no smoothing.
DEPTH_DEFAULTS = {"image_word_layer": 0, "image_word_weight": 0.5, "layer_image_drop": 0.0, "option_smoothing": 0.0}


def chat_template(image: str = QWEN_IMAGE) -> str:
    """Qwen's message format; `image` is what an image part becomes (the family's placeholder)."""
    return CHAT_TEMPLATE.replace(QWEN_IMAGE, image)


CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{%- if message['content'] is string -%}{{ message['content'] }}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'image' -%}{{ '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{%- elif part['type'] == 'text' -%}{{ part['text'] }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{ '<|im_end|>\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\n' }}{%- endif -%}"
)


def task_texts(n_per_kind: int = 40, seed: int = 12345) -> list[str]:
    """Prompts and answers of every task on both synthetic corpora, and the chat template's role lines:
    the BPE training text (so "user" and "assistant" are one token each, as in Qwen's vocabulary)."""
    texts = ["user\n", "assistant\n"] * 50 * n_per_kind
    for corpus in (SyntheticCorpus("cm"), SyntheticCorpus("co")):
        for kind in ALL_KINDS:
            for item in build_task_items(kind, corpus, n_per_kind, seed):
                texts += [item.prompt, item.answer]
    return texts


def build_tokenizer(extra_special: tuple[str, ...] = (), template: str = CHAT_TEMPLATE) -> Qwen2Tokenizer:
    """The byte-level BPE (the same merges for every family) with Qwen's special tokens plus `extra_special`."""
    bpe = Tokenizer(BPE(unk_token=None, continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False))
    bpe.normalizer = normalizers.NFC()
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_SPLIT_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=BPE_VOCAB_SIZE,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<|endoftext|>"],
    )
    bpe.train_from_iterator(task_texts(), trainer=trainer)
    trained = json.loads(bpe.to_str())["model"]  # {"vocab": {token: id}, "merges": [[a, b], ...]}
    merges = [tuple(pair) for pair in trained["merges"]]
    tokenizer = Qwen2Tokenizer(
        vocab=trained["vocab"],
        merges=merges,
        unk_token="<|endoftext|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        extra_special_tokens=SPECIAL_TOKENS[1:] + list(extra_special),
        padding_side="left",
    )
    tokenizer.chat_template = template
    return tokenizer


def build_processor(family: str = "qwen3_vl", merge_size: int = MERGE_SIZE):
    """The processor of a toy of `family` (FAMILIES); a Qwen toy's image tokens each merge `merge_size` x
    `merge_size` patches of 16 px (MERGE_SIZES)."""
    if family not in FAMILIES:
        raise ValueError(f"toy family {family!r} is not one of {FAMILIES}")
    if merge_size not in MERGE_SIZES or (family == "llava" and merge_size != MERGE_SIZE):
        raise ValueError(f"merge_size {merge_size} is not one of {MERGE_SIZES} (llava: {MERGE_SIZE} only)")
    if family == "llava":
        return _llava_processor()
    tokenizer = build_tokenizer()
    size = {"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS}
    image_processor = Qwen2VLImageProcessor(
        size=size,
        patch_size=PATCH_SIZE,
        merge_size=merge_size,
        temporal_patch_size=TEMPORAL_PATCH,
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
    )
    video_class, processor_class = {
        "qwen3_vl": (Qwen3VLVideoProcessor, Qwen3VLProcessor),
        "qwen2_vl": (Qwen2VLVideoProcessor, Qwen2VLProcessor),
    }[family]
    video_processor = video_class(
        size=size, patch_size=PATCH_SIZE, merge_size=merge_size, temporal_patch_size=TEMPORAL_PATCH
    )
    return processor_class(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        chat_template=CHAT_TEMPLATE,
    )


def _llava_processor() -> LlavaProcessor:
    """CLIP image processing onto the LLAVA_IMAGE_SIZE square (resize without crop, so every panel stays in
    view; the LLaVA adapter follows the processor's do_center_crop), the <image> placeholder."""
    template = chat_template(LLAVA_IMAGE_TOKEN)
    tokenizer = build_tokenizer((LLAVA_IMAGE_TOKEN,), template)
    image_processor = CLIPImageProcessor(
        size={"height": LLAVA_IMAGE_SIZE, "width": LLAVA_IMAGE_SIZE},
        do_center_crop=False,
        crop_size={"height": LLAVA_IMAGE_SIZE, "width": LLAVA_IMAGE_SIZE},
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
    )
    return LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=LLAVA_PATCH,
        vision_feature_select_strategy="default",
        chat_template=template,
        image_token=LLAVA_IMAGE_TOKEN,
        num_additional_image_tokens=1,  # CLIP's CLS, dropped by the "default" strategy
    )


def build_config(tokenizer, family: str = "qwen3_vl", layers: int = 8, merge_size: int = MERGE_SIZE):
    """The config of a toy of `family` with `layers` text layers and a Qwen tower merging `merge_size` x
    `merge_size` patches per image token (the shipped toy: qwen3_vl, 8, 4)."""
    if family == "qwen2_vl":
        return _qwen2_vl_config(tokenizer, layers, merge_size)
    if family == "llava":
        return _llava_config(tokenizer, layers)
    return _qwen3_vl_config(tokenizer, layers, merge_size)


def _qwen3_vl_config(tokenizer, layers: int, merge_size: int) -> Qwen3VLConfig:
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in SPECIAL_TOKENS}
    # head_dim 32 and rope theta 1e4: six of the 16 frequency pairs turn less than a radian over 200 tokens
    # (follow-up turns sit 100-300 tokens after the image), room for content lookups from any turn; at
    # theta 1e3 only three do and the grid lookup never formed. Places are read from the image tokens'
    # own words (the image-word loss in train.py), not from rotary distances, which a slow theta blurs.
    head_dim = 32
    text_config = dict(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=layers,
        num_attention_heads=16,
        num_key_value_heads=4,
        head_dim=head_dim,
        max_position_embeddings=1024,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 10_000.0,
            "mrope_section": [8, 4, 4],
            "mrope_interleaved": True,
        },  # sums to head_dim / 2
        pad_token_id=ids["<|endoftext|>"],
        tie_word_embeddings=True,
    )
    # Merge 4 (the shipped toy: one token per panel): one token holds a whole object, so "which panel shows X"
    # is a lookup over 6 tokens. Merge 2 (the graded toys, Qwen's own): a panel is 2 x 2 tokens, so masks,
    # steering and discovery scores act on several keys per region, as in a real VLM. The merger's width is
    # hidden x merge^2, so the tower is 64 wide and keeps one deepstack layer (three mergers at width 128
    # would be 13 M parameters).
    vision_config = dict(
        depth=4,
        hidden_size=64,
        intermediate_size=256,
        num_heads=4,
        patch_size=PATCH_SIZE,
        spatial_merge_size=merge_size,
        temporal_patch_size=TEMPORAL_PATCH,
        out_hidden_size=128,
        num_position_embeddings=256,
        deepstack_visual_indexes=[2],
    )
    return Qwen3VLConfig(text_config=text_config, vision_config=vision_config, **_qwen_vl_token_ids(ids))


def _qwen_vl_token_ids(ids: dict[str, int]) -> dict:
    """The Qwen-VL configs' special-token fields (shared by Qwen3-VL and Qwen2-VL), from token -> id."""
    return dict(
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=True,
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
    )


def _qwen2_vl_config(tokenizer, layers: int, merge_size: int) -> Qwen2VLConfig:
    """Qwen2-VL: no QK-norm and head_dim = hidden / heads, so 8 heads of 16 (64 candidate heads at 8 layers);
    the vision tower has no position table (2-D rotary inside), patch 16, `merge_size` x `merge_size` merge."""
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in SPECIAL_TOKENS}
    text_config = dict(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=layers,
        num_attention_heads=8,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        rope_parameters={"rope_type": "default", "rope_theta": 10_000.0, "mrope_section": [2, 3, 3]},  # sums to 8
        pad_token_id=ids["<|endoftext|>"],
        bos_token_id=None,
        eos_token_id=ids["<|im_end|>"],
        tie_word_embeddings=True,
    )
    vision_config = dict(
        depth=4,
        embed_dim=64,
        hidden_size=128,  # the merger's output: the text width
        mlp_ratio=4,
        num_heads=4,
        patch_size=PATCH_SIZE,
        spatial_merge_size=merge_size,
        temporal_patch_size=TEMPORAL_PATCH,
    )
    return Qwen2VLConfig(text_config=text_config, vision_config=vision_config, **_qwen_vl_token_ids(ids))


def _llava_config(tokenizer, layers: int) -> LlavaConfig:
    """LLaVA: a 4-block CLIP tower 64 wide (LLAVA_IMAGE_SIZE, LLAVA_PATCH), the two-layer projector, a Llama text
    model of the Qwen3-VL toy's shape (16 heads of 32, 4 kv heads, hidden 128) without QK-norm."""
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in SPECIAL_TOKENS + [LLAVA_IMAGE_TOKEN]}
    text_config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=layers,
        num_attention_heads=16,
        num_key_value_heads=4,
        head_dim=32,
        max_position_embeddings=1024,
        rope_parameters={"rope_type": "default", "rope_theta": 10_000.0},
        pad_token_id=ids["<|endoftext|>"],
        bos_token_id=None,
        eos_token_id=ids["<|im_end|>"],
        tie_word_embeddings=True,
    )
    vision_config = CLIPVisionConfig(
        hidden_size=64,
        intermediate_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        image_size=LLAVA_IMAGE_SIZE,
        patch_size=LLAVA_PATCH,
    )
    return LlavaConfig(
        vision_config=vision_config,
        text_config=text_config,
        image_token_index=ids[LLAVA_IMAGE_TOKEN],
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
        projector_hidden_act="gelu",
        tie_word_embeddings=True,
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
    )
