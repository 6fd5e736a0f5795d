"""How much a masking lets a row read later positions: the leak of "leaky_uniform" (helpers.engine.masking).

Under any causal masking the rows before an item's first image token never see the image, so they are the same
whatever the image holds. ``leak`` measures, for one item and one head-set, at those rows: how much the masking
changes the logits and the last hidden states (which a masking that intervenes there, e.g. query_zero at rows
"all", does legitimately), how much they change when only the image changes under the same masking (0 exactly for
every masking but leaky_uniform), and the attention mass the masked heads place on later positions.
"""

from dataclasses import dataclass

import torch

from helpers.engine.attention import HIDE, Intervention, probe


@dataclass
class Leak:
    logits: float  # max |masked - clean| logit at the rows before the first image token
    hidden: float  # the same for the last hidden states (the text backbone's output)
    from_image: float  # max |logit change| at those rows when the image's pixels are negated, under the masking
    future_mass: float  # attention mass the masked heads put on later positions, summed over heads and rows
    future_mass_per_row: float  # its mean over the masked (head, row) pairs: 0.5 - 1 / (2 T) for rows "all"


@torch.no_grad()
def leak(
    lm,
    item: dict,
    heads: torch.Tensor,
    masking: str = "leaky_uniform",
    query_rows: torch.Tensor | str = "all",
    factor=0.0,
) -> Leak:
    """The Leak of one item (a one-item processor output without pads, on the model's device) with the head-set
    ``heads`` [L, H] masked by ``masking`` at ``query_rows`` ([1, T] bool or "all"); the keyed maskings (hide, rescale)
    act on the image tokens, rescale by ``factor``.

    ``future_mass`` follows from the masking's definition (the tests check the engine against an eager oracle):
    leaky_uniform gives row i of T positions (T - 1 - i) / T on later positions, every other masking 0."""
    image = lm.adapter.image_positions(item["input_ids"])  # [1, T]
    if not image.any():
        raise ValueError("leak needs an item with an image: it measures the rows before the first image token")
    first = int(image[0].nonzero()[0])
    spec = Intervention(
        heads=heads[None], keys=image, bias=HIDE, query_rows=query_rows, masking=masking, factor=factor
    )
    negated = dict(item, pixel_values=-item["pixel_values"])  # another image, the same tokens and positions
    clean = lm.model(**item, output_hidden_states=True)  # every forward alike: a forward without hidden states
    with probe(lm, intervene=spec):  # may round its logits differently (a 1e-7 change)
        masked = lm.model(**item, output_hidden_states=True)
        other = lm.model(**negated, output_hidden_states=True).logits
    length = item["input_ids"].shape[1]
    chosen = (
        torch.ones(length, dtype=torch.bool) if isinstance(query_rows, str) else query_rows[0, :length].cpu()
    )  # [T]
    later = (length - 1 - torch.arange(length))[chosen].float() / length  # [r] leaky_uniform's mass on later keys
    pairs = int(heads.sum()) * int(chosen.sum())
    future = float(later.sum()) * int(heads.sum()) if masking == "leaky_uniform" else 0.0
    return Leak(
        logits=_max_change(masked.logits, clean.logits, first),
        hidden=_max_change(masked.hidden_states[-1], clean.hidden_states[-1], first),
        from_image=_max_change(other, masked.logits, first),
        future_mass=future,
        future_mass_per_row=future / max(pairs, 1),
    )


def _max_change(a: torch.Tensor, b: torch.Tensor, first: int) -> float:
    """max |a - b| over rows [0, first) of [1, T, ...] tensors (0 when there are none)."""
    return float((a[:, :first].float() - b[:, :first].float()).abs().amax()) if first else 0.0
