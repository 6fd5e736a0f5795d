"""The depth recipe's training parts (TRAINING.md, "Reading across depth, answering at the paper's confidence"):
the image-word loss read from a middle layer or dropped, structured dropout of the image across depth, label
smoothing among the option letters, and a run started from another toy's weights (--init-from).
"""

import json

import torch

from helpers.storage.paths import toy_folder
from helpers.toy.build import DEPTH_DEFAULTS


def letter_answer_loss(
    logits: torch.Tensor, letter_target: torch.Tensor, letter_ids: list[int], eps: float
) -> torch.Tensor:
    """[M]: the cross-entropy of each letter answer (logits [M, V] at the position that predicts it, letter_target
    [M] its option index) against the target smoothed by `eps` (helpers.toy.train.Recipe.option_smoothing)."""
    log_probs = logits.log_softmax(dim=-1)[:, letter_ids]  # [M, 4]
    target = torch.full_like(log_probs, eps / (len(letter_ids) - 1))
    target.scatter_(1, letter_target[:, None], 1.0 - eps)
    return -(target * log_probs).sum(dim=1)


class LayerImageDrop:
    """Structured dropout across depth on the image pathway: in training mode, per sequence and per text layer
    independently with probability `p`, the image tokens are hidden from every head of that layer at every
    query row (the engine's HIDE at row group "all", which the probe and NCS use). LayerDrop (Fan et al. 2019,
    arXiv 1909.11556) drops whole layers at rate 0.1-0.5 so that none is indispensable; here only a layer's
    access to the image is dropped, so that no single layer is where the image must be read. A forward pre-hook
    on each layer's attention that edits its attention mask; set `image_keys` [B, T] before each forward."""

    def __init__(self, model, p: float):
        self.p, self.image_keys, self.handles = p, None, []
        if p > 0:
            for layer in model.model.language_model.layers:
                self.handles.append(layer.self_attn.register_forward_pre_hook(self.hide, with_kwargs=True))

    def hide(self, module, args, kwargs):
        if not module.training:
            return None
        hidden = kwargs.get("hidden_states", args[0] if args else None)  # [B, T, D]
        batch, length = hidden.shape[:2]
        dropped = torch.rand(batch, device=hidden.device) < self.p  # [B]
        hide = (dropped[:, None] & self.image_keys)[:, None, None, :]  # [B, 1, 1, T]: keys hidden at every row
        mask = kwargs.get("attention_mask")
        if mask is None:
            mask = torch.ones(length, length, dtype=torch.bool, device=hidden.device).tril()[None, None]
        if mask.dtype == torch.bool:
            mask = mask & ~hide
        else:
            mask = mask.masked_fill(hide, torch.finfo(mask.dtype).min)
        return args, {**kwargs, "attention_mask": mask}

    def remove(self):
        for handle in self.handles:
            handle.remove()


def depth_recipe(recipe) -> dict:
    """The depth recipe's settings of a run's `recipe` (helpers.toy.train.Recipe; None: DEPTH_DEFAULTS, the recipe
    of every toy before it)."""
    return {key: getattr(recipe, key) if recipe else default for key, default in DEPTH_DEFAULTS.items()}


def initialised_from(name: str) -> dict:
    """The toy an --init-from run started from: its name and its run's steps and cycles."""
    summary = json.loads((toy_folder(name) / "heldout_accuracy.json").read_text())
    return {
        "toy": name,
        "steps": summary["steps"],
        "cycles": summary.get("cycles") or [],
        "recipe": _recipe_of(summary),
    }


def _recipe_of(summary: dict) -> dict:
    keys = ("family", "merge_size", "drophead", "image_word_layer", "image_word_weight", "layer_image_drop")
    return {key: (depth_recipe(None) | summary).get(key) for key in keys}
