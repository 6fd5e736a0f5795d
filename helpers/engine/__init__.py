"""The head-level attention engine: read, mask and steer any set of attention heads of a Hugging Face VLM.

The whole public API, by module:

- ``devices``, ``model_files``, ``row_groups``: names and files checked before anything loads (no torch).
- ``loading``: ``load_model(name, device, dtype)`` -> ``LoadedModel`` (model, processor, adapter, name, folder)
  for "toy", a local ``save_pretrained`` folder or a hub id (device and dtype may be "auto");
  ``wrap_model`` for a model built in memory; ``model_fingerprint`` (file contents + hub commit) for cache keys;
  on the CPU, glibc's allocator keeps freed activations for reuse (``allocator``).
- ``compiled``: ``compile_decoder_layers(lm)``, torch.compile for the text backbone's decoder layers.
- ``attention``: the attention function registered with transformers (``ATTENTION``) and the probe:
  ``probe(lm, read=Read(...), intervene=Intervention(...))`` around any forward or ``generate``;
  ``HIDE`` is the bias that masks keys.
- ``masking`` (no torch): ``MASKINGS``, the ways an intervention masks a head (default "hide"; the visual-head
  repositories' query zeroing, output zeroing, post-softmax rescaling and, on purpose, their leaky attention);
  ``leakage``: ``leak(lm, item, heads, masking)``, how much a masking lets the rows before the image read later ones.
- ``head_sets``: many head-sets per forward: ``stack_head_sets``, ``expand_item``, ``run_head_sets``
  (the copies run only the rows after those no copy changes, continuing the clean item's keys and values);
  ``kept_rows``: the last decoder layer at the kept rows only when only the last rows' logits are kept.
- ``adapters``: one per family (``adapter_for(config)``): candidate layers, head counts, image-token
  positions of a pixel region, and how a family's text-backbone inputs are repeated; families without a
  hand-written adapter get the generic one (whole-image groups only, no region mapping).
- ``copy_hook`` (no torch): where a run's copy ledger plugs in; ``run_head_sets`` and ``probe`` count their copies
  only through an installed counter (``copy_ledger.install_counter()``, as the runner does for each notebook), and
  with none they do nothing but compute.
- ``item``: ``Item``, the record of one stimulus (image, prompt, regions, options); ``inputs``: items -> one
  left-padded processor batch with query-span and answer masks (``build_batch``, memoised per item by
  ``item_batch``), and the front door of ``run_head_sets`` (``one_item_inputs``): an Item, a Batch of one item or
  a processor output, checked against the family's input layout (``Adapter.check_inputs``: one item's rows, pixel
  rows against the image grid, image tokens against the pixels).
- ``image_attention``: ``image_mass(lm, items, row_group)``, each head's attention mass to the image, [B, L, H].
- ``mcq``: option-letter probabilities, clean and under head-set interventions (``letter_probs_under``, at the
  query rows of a row group).
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the names below load on first use (__getattr__): importing the package imports no torch
    from helpers.engine.adapters import Adapter, adapter_for
    from helpers.engine.attention import ATTENTION, HIDE, Intervention, Read, Recording, probe
    from helpers.engine.compiled import compile_decoder_layers
    from helpers.engine.head_sets import expand_item, heads_to_mask, run_head_sets, stack_head_sets
    from helpers.engine.image_attention import image_mass
    from helpers.engine.inputs import Batch, build_batch
    from helpers.engine.item import Item
    from helpers.engine.leakage import Leak, leak
    from helpers.engine.loading import LoadedModel, load_model, wrap_model
    from helpers.engine.masking import MASKINGS

_HOME = {
    "adapters": ("Adapter", "adapter_for"),
    "attention": ("ATTENTION", "HIDE", "Intervention", "Read", "Recording", "probe"),
    "compiled": ("compile_decoder_layers",),
    "head_sets": ("expand_item", "heads_to_mask", "run_head_sets", "stack_head_sets"),
    "image_attention": ("image_mass",),
    "inputs": ("Batch", "build_batch"),
    "item": ("Item",),
    "leakage": ("Leak", "leak"),
    "loading": ("LoadedModel", "load_model", "wrap_model"),
    "masking": ("MASKINGS",),
}
_MODULE_OF = {name: module for module, names in _HOME.items() for name in names}
__all__ = [
    "ATTENTION",
    "HIDE",
    "MASKINGS",
    "Adapter",
    "Batch",
    "Intervention",
    "Item",
    "Leak",
    "LoadedModel",
    "Read",
    "Recording",
    "adapter_for",
    "build_batch",
    "compile_decoder_layers",
    "expand_item",
    "heads_to_mask",
    "image_mass",
    "leak",
    "load_model",
    "probe",
    "run_head_sets",
    "stack_head_sets",
    "wrap_model",
]


def __getattr__(name: str):
    """`from helpers.engine import load_model` imports helpers.engine.loading (and torch) only then, so the
    parameter checks can import the engine's light modules (devices, model_files, row_groups) in a blink."""
    if name not in _MODULE_OF:
        raise AttributeError(f"module 'helpers.engine' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"helpers.engine.{_MODULE_OF[name]}"), name)
