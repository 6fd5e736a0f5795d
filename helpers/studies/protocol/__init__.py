"""The paper's reporting protocol as a report card for any model and head-set (notebook 07_protocol).

Notebook 07 builds the card (`python -m helpers.protocol` runs it through the runner, helpers/protocol.py) and
writes report.md and report.html beside its executed copy. For each head-set S the card holds:

- provenance: the model and its weights fingerprint; what the discovery score was (setting, corpus,
  query, source, k, selection); the half-split noise ceiling of its discovery data where known;
- the baseline audit of the evaluation data (helpers/measures/baselines.py);
- necessity: NCS and NCS_grid against layer-matched random sets (rank p with its floor, z, effect with
  an interval, Holm across the head-sets given);
- steerability: CERS against layer-matched and any-layer random sets at the chosen beta, a beta sweep;
- generic damage (attention sinks, text-heavy heads, whole layers, random 2k / 4k heads) and the row
  groups where necessity acts (all / question + option / last);
- with a control scheme (notebook 07's `controls`), a control-scheme line: NCS against the random sets one of
  the field's control schemes draws (helpers/measures/control_schemes.py: bottom5, same-band, ...), its
  verdict beside the layer-matched one;
- a verdict table (helpers/measures/verdicts.py) and a conclusion built from its rows.

With a published method (notebook 07's `method`: gaze, ver, localization, sparsemm, ocr, retrieval, qrhead,
ablation, attribution: the methods of helpers/measures/methods, notebook 08) the card first scores every head with
the method on notebook 08's strips (its n_items, through the result cache) on the model it loads for the card, so
the model loads once, saves the top-k set (k: `import_k`, else 08's) as a head-set file with the method's
provenance (method, citation, parameters) in the run folder's headsets/, and cards it beside any `heads`.

Every run goes through the result cache with the same draws as notebooks 03-05 (the named streams of
helpers/measures/streams.py, keyed by the set's name), so a discovery set that those notebooks ran is read back.

By module: `head_sets` (the sets carded), `card` (`Protocol`: the checks on one model; `build_card`: every
table), `conclusions` (the verdict table and the conclusion), `render` (report.md, report.html, card.json).
"""

from helpers.studies.protocol.card import Protocol, build_card
from helpers.studies.protocol.conclusions import CONCLUDE, conclusion, scheme_verdict, verdict_table
from helpers.studies.protocol.head_sets import HeadSet, resolve_head_sets
from helpers.studies.protocol.render import SECTIONS, markdown_table, to_html, to_markdown, write_report

__all__ = [
    "CONCLUDE",
    "SECTIONS",
    "HeadSet",
    "Protocol",
    "build_card",
    "conclusion",
    "markdown_table",
    "resolve_head_sets",
    "scheme_verdict",
    "to_html",
    "to_markdown",
    "verdict_table",
    "write_report",
]
