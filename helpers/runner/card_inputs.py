"""What the report card (helpers/studies/protocol) reads of other notebooks' declarations, which the runner keeps:
notebook 01's strips per discovery forward, and notebook 08's sizes for a head-set discovered with a published
method (notebook 07's `method`); and the refusal of a method the model's family cannot serve."""

from pathlib import Path

from helpers.measures.methods import REGION_METHODS, citation
from helpers.measures.methods.cached import ITEMS, method_score
from helpers.measures.overlap import top_k
from helpers.runner.params import declared_parameters, model_adapter, validate
from helpers.stimuli.design import k_for
from helpers.storage import headsets
from helpers.storage.cache import ResultCache
from helpers.studies import protocol


class NotebookProtocol(protocol.Protocol):
    """The card of notebook 07 and `python -m helpers.protocol`, given 01's strips per forward and method_head_set."""

    def __init__(self, params):
        super().__init__(params, declared_parameters("01_discovery")["strips_per_forward"], method_head_set)


def method_head_set(lm, method: str, params, folder: Path, k: int | None = None) -> Path:
    """Discover a head-set with the published `method` (helpers/measures/methods) on the loaded model `lm`, on
    notebook 08's strips at the card's seed, profile and smoke (08's n_items, through the card's result cache), and
    save its top-k (k, else 08's k) as `<folder>/<method>.json` with the method's provenance."""
    declared = declared_parameters("08_methods")
    n_items = validate({"n_items": declared["n_items"], "profile": params.profile, "smoke": params.smoke}).n_items
    score = method_score(lm, method, n_items, params.seed, ResultCache(params.cache_dir))
    k = k_for(score.size, declared["k"] if k is None else k)
    path = Path(folder) / f"{method}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    provenance = {
        "method": method,
        "citation": citation(method),
        "parameters": {"n_items": n_items, "strips": ITEMS, "seed": params.seed, "k": k, "dtype": params.dtype},
    }
    selection = f"flat top-{k} of the {method} score over {n_items} strips (helpers/measures/methods)"
    headsets.save(
        path, model=params.model, setting=method, selection=selection, mask=top_k(score, k), scores=score,
        provenance=provenance,
    )  # fmt: skip
    return path


def refuse_unservable(method: str, model: str) -> None:
    """A region method on a family that maps no pixel region to tokens: a ValueError, before any model loads."""
    adapter = model_adapter(model)
    if method in REGION_METHODS and adapter is not None and not adapter.maps_regions:
        raise ValueError(f"method {method!r} reads the image tokens of regions. {adapter.no_region_mapping}")
