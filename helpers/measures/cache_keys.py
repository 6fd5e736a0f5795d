"""What a measurement's cache key (helpers.storage.cache.computation_key) records of the model and the corpus it
runs on."""

from helpers.engine.loading import processor_fingerprint
from helpers.engine.model_files import model_fingerprint
from helpers.stimuli.corpora import corpus_identity
from helpers.stimuli.prepared import corpus_of


def model_identity(lm) -> dict[str, str]:
    """What a cache key records of the model `lm` runs: computation_key's model_fingerprint, processor_fingerprint,
    dtype and device_kind."""
    return {
        "model_fingerprint": model_fingerprint(lm),
        "processor_fingerprint": processor_fingerprint(lm),
        "dtype": str(lm.model.dtype),
        "device_kind": lm.model.device.type,
    }


def corpus_key(corpus: str) -> str:
    """What a cache key records of the corpus named `corpus` (its name, or an image corpus's content)."""
    return corpus_identity(corpus_of(corpus))
