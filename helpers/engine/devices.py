"""Device and dtype names, resolved without importing torch unless the answer needs it (a GPU's presence)."""

DTYPE_NAMES = ("float32", "bfloat16", "float16")


def resolve_device(device: str) -> str:
    """ "auto" -> "cuda" when a GPU is available, else "cpu"; "cuda", "cuda:N" or "mps" must exist here."""
    kind, _, index = device.partition(":")
    if device != "auto" and kind not in ("cpu", "cuda", "mps"):
        raise ValueError(f"device {device!r} is not supported; use 'cpu', 'cuda', 'cuda:N', 'mps' or 'auto'")
    if kind == "cpu":
        return device
    import torch  # only to ask for a GPU

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if kind == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} is not available: this machine has no CUDA GPU; use 'cpu' or 'auto'")
    if kind == "cuda" and index and int(index) >= torch.cuda.device_count():
        raise ValueError(
            f"device {device!r} is not available: this machine has {torch.cuda.device_count()} CUDA GPU(s)"
        )
    if kind == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {device!r} is not available: this machine has no Apple MPS; use 'cpu' or 'auto'")
    return device


def resolve_dtype(dtype: str, device: str) -> str:
    """ "auto" -> "bfloat16" on a CUDA device, else "float32"; anything else must be one of DTYPE_NAMES."""
    if dtype == "auto":
        return "bfloat16" if device.startswith("cuda") else "float32"
    if dtype not in DTYPE_NAMES:
        raise ValueError(f"dtype {dtype!r} is not supported; use one of {sorted(DTYPE_NAMES)} or 'auto'")
    return dtype
