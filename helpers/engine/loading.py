"""Load a VLM (hub id, local folder, or an embedded toy) with the head-probe engine on its text backbone."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForImageTextToText, AutoProcessor

from helpers import paths
from helpers.engine.adapters import Adapter, adapter_for, text_config_path
from helpers.engine.attention import ATTENTION


@dataclass
class LoadedModel:
    model: torch.nn.Module
    processor: object | None
    adapter: Adapter
    name: str


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def attn_implementation_for(config, name: str = ATTENTION) -> dict:
    """``name`` (the head-probe attention) on the text backbone only, as the per-sub-config dict transformers
    accepts: {"text_config": name} for most families, nested for a text config deeper down, {"": name} for a
    config that is its own text config. Every other sub-config (the vision tower) keeps transformers' default,
    sdpa where it supports it."""
    path = text_config_path(config)
    if not path:  # the config is its own text config
        return {"": name}
    spec = name
    for key in reversed(path):
        spec = {key: spec}
    return spec


def load_model(
    name_or_path: str, device: str = "cpu", dtype: str = "float32", trust_remote_code: bool = False
) -> LoadedModel:
    """Load a VLM by hub id or local folder ("toy": the embedded toy model; "toy-qwen2vl", "toy-llava", ...: the
    further toys in helpers/toy/models/) with the head-probe engine on."""

    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not supported; use one of {sorted(DTYPES)}")
    toy = paths.toy_folder(name_or_path)
    path = name_or_path if toy is None else str(toy)
    if toy is not None and not toy.exists():
        raise FileNotFoundError(f"the toy model {name_or_path!r} is not built yet: {toy} does not exist")
    config = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code)
    processor = AutoProcessor.from_pretrained(path, trust_remote_code=trust_remote_code)
    adapter = adapter_for(config, processor)
    model = (
        AutoModelForImageTextToText.from_pretrained(
            path,
            dtype=DTYPES[dtype],
            attn_implementation=attn_implementation_for(config),
            trust_remote_code=trust_remote_code,
        )
        .to(device)
        .eval()
    )
    return LoadedModel(model=model, processor=processor, adapter=adapter, name=name_or_path)


def wrap_model(model: torch.nn.Module, processor=None, name: str = "in-memory") -> LoadedModel:
    """A LoadedModel around a model built in memory (tests, benchmarks); it must run head-probe attention."""
    return LoadedModel(
        model=model.eval(), processor=processor, adapter=adapter_for(model.config, processor), name=name
    )


def model_fingerprint(lm: LoadedModel) -> str:
    """Identity of the weights for cache keys: a hub id as given; a local folder (or "toy") by its
    weight files' names, sizes and first/last MiB, so a retrained model gets new cache entries."""
    folder = paths.toy_folder(lm.name) or Path(lm.name)
    if not folder.is_dir():
        return lm.name
    digest = hashlib.sha256()
    for path in sorted(folder.glob("*.safetensors")):
        size = path.stat().st_size
        with path.open("rb") as handle:
            digest.update(f"{path.name}:{size}".encode() + handle.read(2**20))
            handle.seek(max(0, size - 2**20))
            digest.update(handle.read())
    return f"{lm.name}@{digest.hexdigest()[:12]}"
