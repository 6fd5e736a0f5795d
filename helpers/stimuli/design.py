"""The paper's 2 x 3 x 2 discovery design: names of corpora, queries, attention sources and settings."""

from dataclasses import dataclass
from itertools import product

CORPORA = {"cm": "comics-like strips (flat cartoon panels)", "co": "COCO-like strips (photo-like panels)"}
QUERIES = {"ord": "ordinal: the panel is named by its position", "ref": "referring: the panel is named by its content"}
SOURCES = {
    "last": "the last prompt token",
    "qsp": "the query-span tokens that pick the panel",
    "out": "the generated answer tokens (teacher-forced greedy answer)",
}
SETTINGS = tuple(f"{c}-{q}-{s}" for c, q, s in product(CORPORA, QUERIES, SOURCES))  # 12 names

# The paper's head-set size: flat top-100 of Qwen3-VL-8B's 36 layers x 32 heads.
PAPER_K, PAPER_N_HEADS = 100, 36 * 32
PAPER_K_SHARE = PAPER_K / PAPER_N_HEADS  # ~0.087


@dataclass(frozen=True)
class Setting:
    corpus: str
    query: str
    source: str

    @property
    def name(self) -> str:
        return f"{self.corpus}-{self.query}-{self.source}"


def parse_setting(name: str) -> Setting:
    """'cm-ref-qsp' -> Setting('cm', 'ref', 'qsp'); unknown names raise with the allowed list."""
    if name not in SETTINGS:
        raise ValueError(f"unknown setting {name!r}; allowed: {', '.join(SETTINGS)}")
    return Setting(*name.split("-"))


def k_for(n_heads: int, k: float | int | None = None) -> int:
    """Head-set size: an absolute k (int), a share of all heads (0 < float < 1), or the paper's share."""
    share = PAPER_K_SHARE if k is None else k
    if isinstance(share, float) and 0 < share < 1:
        return max(1, round(share * n_heads))
    if isinstance(share, int) and not isinstance(share, bool) and 0 < share <= n_heads:
        return share
    raise ValueError(f"k={k!r} is not allowed: use an int in 1..{n_heads} or a share 0 < k < 1")
