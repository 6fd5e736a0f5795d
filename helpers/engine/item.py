"""The item an engine run takes: an image, a prompt and its regions, with the MCQ's options.

Boxes are pixel boxes `(x0, y0, x1, y1)`, x1/y1 exclusive; query spans are character offsets into
`Item.prompt`. The paper's item builders live in helpers/stimuli; the engine needs only this record.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from PIL import Image

Box = tuple[int, int, int, int]
LETTERS = ("A", "B", "C", "D")  # option letters of an MCQ, in order


@dataclass
class Item:
    """One stimulus: an image, a prompt, the expected answer text and the regions of the image."""

    kind: str  # e.g. "strip_ord", "grid", "single_mismatched" (the builders' KINDS)
    corpus: str  # name of the corpus the tiles came from
    image: Image.Image  # RGB
    prompt: str  # the user text (the image comes before it in the chat turn)
    answer: str  # the expected answer: a label, "panel 3", a letter, or a description
    query_span: tuple[int, int]  # char offsets [start, end) into prompt of the words that pick the target
    boxes: dict[str, Box]  # every region of the image: "panel 1".."panel 6", "A".."D" or "image"
    target: str  # key of boxes holding the asked-about region
    labels: tuple[str, ...]  # class shown in each region, in the order of boxes
    options: tuple[str, ...] = ()  # option texts of an MCQ, in letter order
    correct: int | None = None  # index into options of the correct option (MCQ only)
    seed_key: tuple[int, ...] = field(default=(), repr=False)  # the rng key the item was built from

    @property
    def query_text(self) -> str:
        return self.prompt[self.query_span[0] : self.query_span[1]]
