"""Files on disk: atomic writes and content hashes remembered between runs.

`atomic_write` writes to a temp file in the target's folder and renames it over the target
(`os.replace`), so a killed run leaves either the old file or the new one, never half of one.
`file_sha256` hashes a file's full content once; the hash is kept in a small JSON index keyed by
(absolute path, size, mtime_ns), so an unchanged file is not read again and a changed one is.
"""

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from helpers.storage import paths

DECIDES_RESULTS = False  # where and how results are kept, not what they are (helpers.storage.code_hash)
_HASH_BLOCK = 2**24  # bytes read per step while hashing (16 MiB)


def atomic_write(path: Path, content: bytes | str | Callable[[Path], None]) -> Path:
    """Write `content` to `path` atomically: bytes, text (utf-8), or `writer(temp_path)` that writes the file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask)  # the permissions a plain open() would give, not mkstemp's 0600
        with os.fdopen(fd, "wb") as handle:
            if isinstance(content, str):
                handle.write(content.encode())
            elif isinstance(content, bytes):
                handle.write(content)
        if callable(content):
            content(tmp)
        with tmp.open("rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def file_sha256(path: Path) -> str:
    """sha256 of the file's full content (see `file_hashes`)."""
    return file_hashes([path])[0]


def file_hashes(files: list[Path]) -> list[str]:
    """sha256 of each file's full content, read once per (absolute path, size, mtime_ns) and remembered
    in the index `paths.FINGERPRINTS` (read and written once per call)."""
    index = _read_index()
    hashes, changed = [], False
    for path in files:
        path = Path(path).resolve()
        stat = path.stat()
        key = f"{path}|{stat.st_size}|{stat.st_mtime_ns}"
        if key not in index:
            index[key] = _hash_content(path)
            changed = True
        hashes.append(index[key])
    if changed:
        _write_index(index)
    return hashes


def _hash_content(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def _read_index() -> dict[str, str]:
    try:
        index = json.loads(paths.FINGERPRINTS.read_text())
    except (OSError, ValueError):  # absent or unreadable: start afresh
        return {}
    return index if isinstance(index, dict) else {}


def _write_index(index: dict[str, str]) -> None:
    live = {key: digest for key, digest in index.items() if Path(key.split("|")[0]).exists()}
    atomic_write(paths.FINGERPRINTS, json.dumps(live, indent=0, sort_keys=True))
