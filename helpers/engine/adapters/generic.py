"""The generic adapter of a family without a hand-written one (whole-image groups, no region mapping), and
``adapter_for``: a config's hand-written adapter, else the generic one (``adapter_from_files``: from config.json)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from helpers.engine.adapters.base import Adapter, adapter_sizes, config_image_token_id, softmax_layers
from helpers.engine.adapters.families import ADAPTERS
from helpers.engine.model_files import model_config

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


# families whose config passes the generic checks below but whose image tokens or attention it would get wrong
WRONG_UNDER_GENERIC = {
    "llama4": (
        "marks each image with an <|image|> token that image_token_index names, while the image features fill the "
        "<|patch|> tokens around it, so the whole-image group would be the marker, not the image; and its "
        "attention temperature scaling restarts its positions in rows run after a cached prefix"
    ),
}


def _generic_refusal(config) -> str | None:
    """Why the generic adapter cannot serve this config, or None."""
    if config.model_type in WRONG_UNDER_GENERIC:
        return WRONG_UNDER_GENERIC[config.model_type]
    text = config.get_text_config(decoder=True)
    if getattr(text, "cross_attention_layers", None):
        return (
            "feeds the image through cross-attention layers, not through image tokens in the sequence, so there "
            "is no image-token group for the self-attention heads to read, mask or steer"
        )
    if config_image_token_id(config) is None:
        return "has no image_token_id / image_token_index in its config, so its image tokens cannot be found"
    if getattr(text, "num_attention_heads", None) is None or getattr(text, "num_hidden_layers", None) is None:
        return "has no num_attention_heads / num_hidden_layers in its text config"
    return None


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
    shape = adapter_sizes(text)
    # run_head_sets may copy the hidden states at a decoder layer only if no later layer takes visual features
    # (deepstack) or reuses an earlier layer's keys (kv sharing); otherwise it copies the backbone's inputs
    deepstack = len(getattr(getattr(config, "vision_config", None), "deepstack_visual_indexes", None) or [])
    never = shape["n_layers"] if getattr(text, "num_kv_shared_layers", 0) else 0
    return GenericAdapter(
        family=config.model_type,
        candidate_layers=softmax_layers(text, shape["n_layers"]),
        image_token_id=config_image_token_id(config),
        min_split_layer=max(deepstack, never),
        **shape,
    )


def adapter_for(config, processor=None) -> Adapter:
    """The adapter of a model config: the family's hand-written one, else the generic one; an unsupported
    family raises, listing the supported ones and why the generic adapter does not apply. With the model's
    ``processor`` (or its image processor), the layout follows the image processor: LLaVA's CLIP centre crop
    (``do_center_crop``, the default) or, without it, the whole image resized onto the square (the LLaVA toy);
    InternVL's tile size and tile counts."""
    if config.model_type not in ADAPTERS:
        return generic_adapter(config)
    return ADAPTERS[config.model_type](config, getattr(processor, "image_processor", processor), processor)


def adapter_from_files(name_or_path: str) -> Adapter | None:
    """The adapter of a model from its config.json alone (no weights), or None for a hub id not on this machine
    yet; an unsupported family raises (adapter_for)."""
    config = model_config(name_or_path)
    return None if config is None else adapter_for(config)
