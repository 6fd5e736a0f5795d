"""The support matrix: which analyses run on each model family, as a markdown table the README embeds.

``support_matrix(rows)`` writes the table from one ``FamilySupport`` per family; the test suite fills them from
its tiny random models (tests/test_support.py: ``python -m tests.test_support`` prints the table), so the
table says what the tests check, no more. ``region_support(adapter)`` says how a family's pixel regions map
to image tokens, or why they cannot.
"""

from __future__ import annotations

from dataclasses import dataclass

MATRIX_COLUMNS = ("family", "read", "mask", "steer", "region analyses", "generate", "largest oracle error")


@dataclass
class FamilySupport:
    family: str
    read: bool  # head attention mass read in prefill and decode
    mask: bool  # heads masked (bias HIDE) on chosen keys
    steer: bool  # heads steered (a finite bias) on chosen keys
    regions: str  # region_support(adapter)
    generate: bool  # the probe and interventions under model.generate
    oracle_error: float  # largest |engine - eager oracle| over read masses and intervened logits


def region_support(adapter) -> str:
    """'yes: <layout>' when pixel regions map to image tokens, else 'no: <why>'."""
    if not adapter.maps_regions:
        return "no: generic adapter (whole-image groups only)"
    return f"yes: {type(adapter).__name__.removesuffix('Adapter')}"


def _mark(ok: bool) -> str:
    return "yes" if ok else "no"


def support_matrix(rows: list[FamilySupport]) -> str:
    """A markdown table, one row per family (sorted), the columns of ``MATRIX_COLUMNS``."""
    lines = ["| " + " | ".join(MATRIX_COLUMNS) + " |", "|" + "---|" * len(MATRIX_COLUMNS)]
    for row in sorted(rows, key=lambda r: r.family):
        cells = [row.family, *map(_mark, (row.read, row.mask, row.steer)), row.regions, _mark(row.generate)]
        lines.append("| " + " | ".join([*cells, f"{row.oracle_error:.1e}"]) + " |")
    return "\n".join(lines) + "\n"
