"""The named random streams every draw comes from: each analysis draws from its own stream, named by a template of
STREAMS, under the run's seed.

    rng = np.random.default_rng(streams.stream(P.seed, "table12/random-2k"))
"""

import hashlib

import numpy as np

from helpers.stimuli.design import SETTINGS

# Every random stream in use, by name: a template formatted with the fields it names. No two analyses
# share a stream; a stream's numbers do not depend on how many draws another analysis takes.
STREAMS = (
    "layer-matched/{setting}",  # notebooks 03-05: the controls of each discovered set (Tables 3, 5, 6, 9, 10, 17)
    "table03/any-layer/{setting}",
    "table09/attention-matched-cers/{setting}",
    "table09/attention-matched-ncs/{setting}",
    "table12/random-2k",
    "table12/random-4k",
    "table13/per-layer/{setting}",
    "table14/{setting}/k{k}",
    "table15/{a}+{b}/{part}",
    "cross-model/layer-matched/{setting}",  # notebook 06: each model's native sets (Tables 8, 16, 19, 24)
    "pointing/layer-matched/{setting}",  # notebook 06: the pointing suite's one draw per set (Tables 23, 26, 27)
    # the field's control schemes (helpers/measures/control_schemes.py; notebook 05, the report card)
    "control-schemes/bottom5/{setting}",
    "control-schemes/same-band/{setting}",
    "control-schemes/uniform-excluding/{setting}",
    "control-schemes/uniform-overlapping/{setting}",
    "control-schemes/per-layer-uniform/{setting}",
    "control-schemes/unseeded/{setting}/seed{draw}",
    # notebook 08: the published methods' top-k sets (helpers/measures/methods)
    "methods/layer-matched/{method}",
    "methods/any-layer",
)


def stream(seed: int, template: str, **fields) -> np.random.SeedSequence:
    """The SeedSequence of the stream named `template.format(**fields)` under `seed`: the name is hashed
    into the entropy, so streams of different names never coincide (tuples of small ints can: numpy's
    SeedSequence drops trailing zeros)."""
    if template not in STREAMS:
        raise ValueError(f"unknown stream {template!r}; add it to helpers/measures/streams.STREAMS; known: {STREAMS}")
    name = template.format(**fields)
    digest = hashlib.sha256(f"{seed}/{name}".encode()).digest()
    return np.random.SeedSequence(int.from_bytes(digest[:16], "little"))


def stream_names(
    settings=SETTINGS,
    ks=(1,),
    pairs=(("a", "b"),),
    parts=("shared", "a-only", "b-only"),
    draws=(0,),
    methods=("gaze", "ablation"),
) -> list[str]:
    """Every stream name the templates give over the given fields (for the uniqueness test)."""
    names = []
    for template in STREAMS:
        if "{method}" in template:
            names += [template.format(method=m) for m in methods]
        elif "{draw}" in template:
            names += [template.format(setting=s, draw=d) for s in settings for d in draws]
        elif "{a}" in template:
            names += [template.format(a=a, b=b, part=part) for a, b in pairs for part in parts]
        elif "{k}" in template:
            names += [template.format(setting=s, k=k) for s in settings for k in ks]
        elif "{setting}" in template:
            names += [template.format(setting=s) for s in settings]
        else:
            names.append(template)
    return names
