"""Where a model's files are and what identifies them, found without loading it (no torch; transformers only to read
a config).

The parameter checks use these to refuse a model that cannot load before anything heavy is imported or loaded:
a toy not built, a folder without a config, weights or a chat template, a hub id that is neither cached nor
reachable. model_fingerprint names a model for cache keys and the copy ledger by the hashes of those files,
processor_fingerprint its processor by its configuration; model_identity is what a cache key records of both.
"""

from __future__ import annotations

import hashlib
import json
import socket
from pathlib import Path
from urllib.parse import urlparse

import huggingface_hub
from huggingface_hub import try_to_load_from_cache
from huggingface_hub.errors import HFValidationError

from helpers.storage import paths
from helpers.storage.files import file_hashes

WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.safetensors.index.json", "*.bin.index.json")
HUB_TIMEOUT_S = 3.0  # how long a check waits for the hub before calling this machine offline


# Files that define a saved model: weights, configs, processor, tokenizer and chat template.
IDENTITY_PATTERNS = ("*.safetensors", "*.json", "*.jinja", "merges.txt", "*.model", "*.tiktoken")


def model_folder(name_or_path: str) -> Path | None:
    """The folder a model loads from: the toy's, a local folder, or a hub id's snapshot in the local Hugging
    Face cache; None for a hub id still to be downloaded. A hub id that is not cached fails here at once when
    the hub cannot be downloaded from (HF_HUB_OFFLINE, or no connection within HUB_TIMEOUT_S), instead of after
    the hub client's retries."""
    toy = paths.toy_folder(name_or_path)
    if toy is not None and not toy.exists():
        raise FileNotFoundError(f"the toy model {name_or_path!r} is not built yet: {toy} does not exist")
    if toy is not None or Path(name_or_path).is_dir():
        return known_folder(name_or_path)
    folder = hub_snapshot(name_or_path)  # a name that is no hub id raises here
    if folder is None:
        why = "HF_HUB_OFFLINE is set" if huggingface_hub.constants.HF_HUB_OFFLINE else _hub_unreachable()
        if why:
            raise FileNotFoundError(
                f"model {name_or_path!r} is not in the local Hugging Face cache "
                f"({huggingface_hub.constants.HF_HUB_CACHE}) and {why}: download it first "
                f"(hf download {name_or_path}) on a machine with access, unset HF_HUB_OFFLINE, or pass a local "
                "save_pretrained folder"
            )
    return folder


def _hub_unreachable() -> str:
    """'' when the hub's host accepts a connection within HUB_TIMEOUT_S, else why not."""
    endpoint = urlparse(huggingface_hub.constants.ENDPOINT)
    host = endpoint.hostname or "huggingface.co"
    try:
        socket.create_connection((host, endpoint.port or 443), timeout=HUB_TIMEOUT_S).close()
    except OSError as error:
        return f"the hub ({host}) cannot be reached from this machine ({type(error).__name__})"
    return ""


def known_folder(name_or_path: str) -> Path | None:
    """model_folder without downloading or raising: None when the model is not on this machine."""
    toy = paths.toy_folder(name_or_path)
    if toy is not None:
        return toy if toy.exists() else None
    if Path(name_or_path).is_dir():
        return Path(name_or_path).resolve()
    try:
        return hub_snapshot(name_or_path)
    except ValueError:  # not a hub id either
        return None


def hub_snapshot(repo_id: str) -> Path | None:
    """The local Hugging Face cache folder of `repo_id`'s current snapshot (named by its commit), or None."""
    try:
        config = try_to_load_from_cache(repo_id, "config.json")
    except HFValidationError as error:
        raise ValueError(
            f"model {repo_id!r} is neither 'toy', an existing folder, nor a hub id like 'org/name': {error}"
        ) from error
    return Path(config).parent if isinstance(config, str) else None


def missing_files(folder: Path) -> str:
    """'' when `folder` holds a config and weights (what from_pretrained needs first), else what is missing."""
    if not (folder / "config.json").is_file():
        return "no config.json"
    if not any(next(folder.glob(pattern), None) for pattern in WEIGHT_PATTERNS):
        return f"no weights ({', '.join(WEIGHT_PATTERNS)})"
    return ""


TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")  # where save_pretrained writes a chat template
TEMPLATE_CONFIGS = ("processor_config.json", "tokenizer_config.json")  # configs that may hold it as "chat_template"


def missing_chat_template(folder: Path) -> str:
    """'' when `folder` gives its processor a chat template (build_batch renders every prompt with it), else what
    is missing: found before the weights load, not at the first item."""
    if any((folder / name).is_file() for name in TEMPLATE_FILES):
        return ""
    for name in TEMPLATE_CONFIGS:
        path = folder / name
        if path.is_file() and json.loads(path.read_text()).get("chat_template"):
            return ""
    return f"no chat template ({', '.join(TEMPLATE_FILES)}, or a chat_template in {' or '.join(TEMPLATE_CONFIGS)})"


def model_config(name_or_path: str):
    """The model's transformers config, read from its config.json alone; None when the model is not on this
    machine (a hub id still to be downloaded)."""
    folder = known_folder(name_or_path)
    if folder is None:
        return None
    from transformers import AutoConfig  # the config classes only: no model code runs

    return AutoConfig.from_pretrained(str(folder))


def model_fingerprint(lm) -> str:
    """Identity of the model for cache keys: the name, the hub commit when it came from a hub snapshot, and
    the sha256 of every file that defines it (IDENTITY_PATTERNS: weights, configs, processor, tokenizer,
    chat template), each hashed once per version (helpers.storage.files). `lm`: a LoadedModel (one built in memory
    is its name), or anything else with a `name` (a model not loaded: its folder is looked up)."""
    folder = lm.folder if hasattr(lm, "adapter") else known_folder(lm.name)
    if folder is None:
        return lm.name
    files = sorted({path for pattern in IDENTITY_PATTERNS for path in folder.glob(pattern) if path.is_file()})
    digest = hashlib.sha256()
    for path, content in zip(files, file_hashes(files)):
        digest.update(f"{path.name}:{content}\n".encode())
    revision = f"@{folder.name[:12]}" if folder.parent.name == "snapshots" else ""
    return f"{lm.name}{revision}#{digest.hexdigest()[:16]}"


def processor_fingerprint(lm) -> str:
    """Identity of the processor for cache keys: the sha256 of its configuration (image processor, chat template;
    transformers' to_json_string), which the model's files need not hold (a model built in memory) and which a
    transformers release may change; "" for a model loaded without a processor."""
    processor = getattr(lm, "processor", None)
    return "" if processor is None else hashlib.sha256(processor.to_json_string().encode()).hexdigest()[:16]


def model_identity(lm) -> dict[str, str]:
    """What a cache key records of the model `lm` runs: computation_key's model_fingerprint, processor_fingerprint,
    dtype and device_kind."""
    return {
        "model_fingerprint": model_fingerprint(lm),
        "processor_fingerprint": processor_fingerprint(lm),
        "dtype": str(lm.model.dtype),
        "device_kind": lm.model.device.type,
    }
