"""The names the notebooks' parameters and the report card's options may take, in a module that imports nothing, so
that the runner's parameter check (helpers/runner/params.py) needs no torch.

METHOD_NAMES: the published methods of notebook 08 and the report card's --method (helpers/measures/methods scores
them); CONTROL_SCHEMES: the control schemes of notebook 05's last table and the report card's --controls
(helpers/measures/control_schemes.py draws them), ours first, then the field's draws.
"""

METHOD_NAMES = ("gaze", "ver", "localization", "sparsemm", "ocr", "retrieval", "qrhead", "ablation", "attribution")
CONTROL_SCHEMES = (
    "layer-matched",
    "any-layer",
    "bottom5",
    "same-band",
    "uniform-excluding",
    "uniform-overlapping",
    "per-layer-uniform",
    "unseeded",
)
