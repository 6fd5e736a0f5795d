"""Load a VLM (hub id, local folder, or the embedded "toy") with the head-probe engine on its text backbone."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import huggingface_hub
import torch
from huggingface_hub import try_to_load_from_cache
from huggingface_hub.errors import HFValidationError
from transformers import AutoConfig, AutoModelForImageTextToText, AutoProcessor

from helpers import paths
from helpers.engine.adapters import Adapter, adapter_for
from helpers.engine.attention import ATTENTION
from helpers.files import file_hashes


@dataclass
class LoadedModel:
    model: torch.nn.Module
    processor: object | None
    adapter: Adapter
    name: str
    folder: Path | None = None  # the save_pretrained folder (or hub snapshot) it was loaded from


# Files that define a saved model: weights, configs, processor, tokenizer and chat template.
IDENTITY_PATTERNS = ("*.safetensors", "*.json", "*.jinja", "merges.txt", "*.model", "*.tiktoken")


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def attn_implementation_for(config) -> dict:
    """Head-probe attention on the text backbone, sdpa on the vision tower."""
    return {"text_config": ATTENTION, "vision_config": "sdpa"}


def load_model(
    name_or_path: str, device: str = "cpu", dtype: str = "float32", trust_remote_code: bool = False
) -> LoadedModel:
    """Load a VLM by hub id or local folder ("toy": the embedded toy model) with the head-probe engine on."""

    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not supported; use one of {sorted(DTYPES)}")
    folder = model_folder(name_or_path)
    path = str(folder) if folder is not None else name_or_path  # None: a hub id to download
    config = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code)
    adapter = adapter_for(config)
    model = (
        AutoModelForImageTextToText.from_pretrained(
            path,
            use_safetensors=True,
            dtype=DTYPES[dtype],
            attn_implementation=attn_implementation_for(config),
            trust_remote_code=trust_remote_code,
        )
        .to(device)
        .eval()
    )
    processor = AutoProcessor.from_pretrained(path, trust_remote_code=trust_remote_code)
    folder = folder or hub_snapshot(name_or_path)
    return LoadedModel(model=model, processor=processor, adapter=adapter, name=name_or_path, folder=folder)


def model_folder(name_or_path: str) -> Path | None:
    """The folder a model loads from: the toy's, a local folder, or a hub id's snapshot in the local Hugging
    Face cache; None for a hub id still to be downloaded. Offline (HF_HUB_OFFLINE), a hub id that is not
    cached fails here at once instead of after the hub client's retries."""
    if name_or_path == "toy":
        if not paths.TOY_MODEL.exists():
            raise FileNotFoundError(f"the toy model is not built yet: {paths.TOY_MODEL} does not exist")
        return paths.TOY_MODEL
    if Path(name_or_path).is_dir():
        return Path(name_or_path).resolve()
    snapshot = hub_snapshot(name_or_path)
    if snapshot is None and huggingface_hub.constants.HF_HUB_OFFLINE:
        raise FileNotFoundError(
            f"model {name_or_path!r} is not in the local Hugging Face cache "
            f"({huggingface_hub.constants.HF_HUB_CACHE}) and HF_HUB_OFFLINE is set: download it first "
            f"(hf download {name_or_path}), unset HF_HUB_OFFLINE, or pass a local save_pretrained folder"
        )
    return snapshot


def hub_snapshot(repo_id: str) -> Path | None:
    """The local Hugging Face cache folder of `repo_id`'s current snapshot (named by its commit), or None."""
    try:
        config = try_to_load_from_cache(repo_id, "config.json")
    except HFValidationError as error:
        raise ValueError(
            f"model {repo_id!r} is neither 'toy', an existing folder, nor a hub id like 'org/name': {error}"
        ) from error
    return Path(config).parent if isinstance(config, str) else None


def wrap_model(model: torch.nn.Module, processor=None, name: str = "in-memory") -> LoadedModel:
    """A LoadedModel around a model built in memory (tests, benchmarks); it must run head-probe attention."""
    return LoadedModel(model=model.eval(), processor=processor, adapter=adapter_for(model.config), name=name)


def model_fingerprint(lm: LoadedModel) -> str:
    """Identity of the model for cache keys: the name, the hub commit when it came from a hub snapshot, and
    the sha256 of every file that defines it (IDENTITY_PATTERNS: weights, configs, processor, tokenizer,
    chat template), each hashed once per version (helpers.files). A model built in memory is its name."""
    if lm.folder is None:
        return lm.name
    files = sorted({path for pattern in IDENTITY_PATTERNS for path in lm.folder.glob(pattern) if path.is_file()})
    digest = hashlib.sha256()
    for path, content in zip(files, file_hashes(files)):
        digest.update(f"{path.name}:{content}\n".encode())
    revision = f"@{lm.folder.name[:12]}" if lm.folder.parent.name == "snapshots" else ""
    return f"{lm.name}{revision}#{digest.hexdigest()[:16]}"
