"""The chunks of one cached per-item computation (ResultCache.cached_chunks): each chunk [start, stop) is its own
entry of the cache, its copies counted in the ledger (helpers.storage.ledger) as read back or computed.

With one copy per item, a run's last chunk also meets another run's of the same start: a missing chunk is cut from
a longer entry on disk (a larger run's), or completed from the longest shorter one (a smaller run's last chunk),
only its items past that entry computed.
"""

from collections.abc import Callable
from pathlib import Path

import numpy as np

from helpers.storage import ledger


class ChunkStore:
    """The chunk entries of the computation `name` keyed `params` in `cache` (a ResultCache)."""

    def __init__(self, cache, name: str, params: dict, one_copy_per_item: bool = False):
        self.cache, self.name, self.params = cache, name, params
        self.one_copy_per_item = one_copy_per_item
        self.label = ledger.computation(name, params)

    def key(self, start: int, stop: int) -> dict:
        """The cache key of chunk [start, stop)."""
        return {**self.params, "chunk": [start, stop]}

    def read_back(self, key: dict) -> dict[str, np.ndarray] | None:
        """A chunk's arrays when on disk, its copies then counted in the ledger as read back."""
        entry = self.cache.load_entry(self.name, key)
        if entry is None:
            return None
        ledger.chunk_read(self.label, self.cache.path(self.name, key), entry[1])
        return entry[0]

    def cut_from_longer(self, start: int, stop: int, chunk_size: int) -> dict[str, np.ndarray] | None:
        """Chunk [start, stop)'s arrays cut from the shortest entry [start, longer) on disk with stop < longer <=
        start + chunk_size, its first stop - start copies counted as read back; None when there is none."""
        found = self._same_start(start, range(stop + 1, start + chunk_size + 1))
        if found is None:
            return None
        _, (arrays, digests), path = found
        ledger.chunk_read(self.label, path, digests[: stop - start])
        return {k: v[: stop - start] for k, v in arrays.items()}

    def _shorter_entry(self, start: int, stop: int) -> tuple[int, tuple, Path] | None:
        """The longest entry [start, shorter) on disk with start < shorter < stop (as _same_start gives it)."""
        return self._same_start(start, range(stop - 1, start, -1))

    def _same_start(self, start: int, stops) -> tuple[int, tuple, Path] | None:
        """The first entry [start, s) on disk for s in `stops`: (s, its arrays and digests, its path); None when
        there is none."""
        for end in stops:
            key = self.key(start, end)
            entry = self.cache.load_entry(self.name, key)
            if entry is not None:
                return end, entry, self.cache.path(self.name, key)
        return None

    def saver(self, key: dict, compute: Callable[[int, int], dict], start: int, stop: int):
        """The call that computes chunk [start, stop) and saves it as the entry of `key`, counting its copies in the
        ledger. With one copy per item, a shorter entry of the same start found when the chunk is computed leaves
        the chunk only the items past it to compute."""

        def save() -> None:
            with ledger.computing(self.label) as tally:
                head = self._shorter_entry(start, stop) if self.one_copy_per_item else None
                begin = start
                if head is not None:
                    begin, (head_arrays, head_digests), head_path = head
                    ledger.part_read(head_path, head_digests)
                arrays = {k: np.asarray(v) for k, v in compute(begin, stop).items()}
                if self.one_copy_per_item and len(tally.all_digests()) != stop - begin:
                    raise RuntimeError(
                        f"{self.label}: items [{begin}, {stop}) made {len(tally.all_digests())} copies; "
                        "one_copy_per_item needs one per item (is the copy ledger's counter installed? "
                        "helpers.engine.copy_ledger.install_counter())"
                    )
                if head is not None:
                    arrays = {k: np.concatenate([head_arrays[k], v]) for k, v in arrays.items()}
            ledger.chunk_computed(tally, self.cache.save(self.name, key, arrays, tally.held_digests()))

        return save
