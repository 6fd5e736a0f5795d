"""Load a VLM (hub id, local folder, or an embedded toy) with the head-probe engine on its text backbone."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForImageTextToText, AutoProcessor
from transformers.utils import logging as hf_logging

from helpers.engine.adapters import Adapter, adapter_for, text_config_path
from helpers.engine.allocator import keep_freed_memory
from helpers.engine.attention import ATTENTION
from helpers.engine.devices import DTYPE_NAMES, resolve_device, resolve_dtype
from helpers.engine.model_files import hub_snapshot, missing_files, model_folder
from helpers.storage import paths


@dataclass
class LoadedModel:
    model: torch.nn.Module
    processor: object | None
    adapter: Adapter
    name: str
    folder: Path | None = None  # the save_pretrained folder (or hub snapshot) it was loaded from
    compiled: bool = False  # decoder layers torch.compile'd (helpers.engine.compiled)


DTYPES = {name: getattr(torch, name) for name in DTYPE_NAMES}  # name -> torch dtype


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
    further toys in helpers/toy/models/) with the head-probe engine on.

    ``device`` "auto": cuda when available, else cpu; ``dtype`` "auto": bfloat16 on cuda, else float32."""
    device = resolve_device(device)
    dtype = resolve_dtype(dtype, device)
    if device == "cpu":
        keep_freed_memory()
    folder = model_folder(name_or_path)
    missing = missing_files(folder) if folder is not None else ""
    if missing:
        raise FileNotFoundError(f"model {name_or_path!r}: {folder} holds {missing}; pass a save_pretrained folder")
    path = str(folder) if folder is not None else name_or_path  # None: a hub id to download
    config = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code)
    processor = AutoProcessor.from_pretrained(path, trust_remote_code=trust_remote_code)
    adapter = adapter_for(config, processor)
    with _quiet_loading(enabled=folder is not None and folder.resolve().is_relative_to(paths.HELPERS)):
        model = AutoModelForImageTextToText.from_pretrained(
            path,
            use_safetensors=True,
            dtype=DTYPES[dtype],
            attn_implementation=attn_implementation_for(config),
            trust_remote_code=trust_remote_code,
        )
    model = model.to(device).eval()
    folder = folder or hub_snapshot(name_or_path)
    return LoadedModel(model=model, processor=processor, adapter=adapter, name=name_or_path, folder=folder)


@contextmanager
def _quiet_loading(enabled: bool):
    """transformers' "Loading weights" bar off while `enabled` (the embedded toys load in well under a second;
    in an executed notebook the bar is left behind as a widget stuck at 0%); a hub model keeps it."""
    was_on = hf_logging.is_progress_bar_enabled()
    if enabled and was_on:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled and was_on:
            hf_logging.enable_progress_bar()


def wrap_model(model: torch.nn.Module, processor=None, name: str = "in-memory") -> LoadedModel:
    """A LoadedModel around a model built in memory (tests, benchmarks); it must run head-probe attention."""
    return LoadedModel(
        model=model.eval(), processor=processor, adapter=adapter_for(model.config, processor), name=name
    )
