"""The support matrix (helpers.engine.support) filled from the tiny random models of every family the engine
tests cover; ``python -m tests.test_support`` prints it for the README."""

import torch

from helpers.engine import ATTENTION, HIDE, Intervention, Read, probe, wrap_model
from helpers.engine.support import MATRIX_COLUMNS, FamilySupport, region_support, support_matrix
from tests.oracle import ORACLE, oracle_bias
from tests.test_engine import _eager_mass, _groups, _head_set, _oracle_logits
from tests.tiny_models import CONFIGS, tiny_inputs, tiny_model

TOLERANCE = 1e-5  # the engine tests' bound on |engine - eager oracle|


@torch.no_grad()
def family_support(family: str) -> FamilySupport:
    """Read, mask and steer against the eager oracle, and a read under generate, on the family's tiny model."""
    lm, oracle = wrap_model(tiny_model(family, ATTENTION)), tiny_model(family, ORACLE)
    inputs = tiny_inputs(family, lm.model)
    T = inputs["input_ids"].shape[1]
    groups = _groups(lm, inputs)
    rows = torch.zeros(2, T, dtype=torch.bool)
    rows[:, T - 3 :] = True
    with probe(lm, read=Read(rows=rows, groups=groups)) as rec:
        lm.model(**inputs)
    oracle_bias.clear()  # the oracle as plain eager attention
    eager = _eager_mass(oracle(**inputs, output_attentions=True).attentions, groups, rows)  # [B, L, H, G]
    read_error = float((rec.mass - eager).abs().max())
    heads, keys = _head_set(lm, 2), groups["first_half"]  # [B, L, H], [B, T]
    errors = {}
    for name, bias in (("mask", HIDE), ("steer", 2.5)):
        expected = _oracle_logits(lm, oracle, inputs, heads, rows, keys, bias)
        with probe(lm, intervene=Intervention(heads=heads, keys=keys, bias=bias, rows=rows)):
            errors[name] = float((lm.model(**inputs).logits - expected).abs().max())
    with probe(lm, read=Read(rows="all", groups=groups)) as rec:
        lm.model.generate(**inputs, max_new_tokens=2, do_sample=False)
    return FamilySupport(
        family=family,
        read=read_error < TOLERANCE,
        mask=errors["mask"] < TOLERANCE,
        steer=errors["steer"] < TOLERANCE,
        regions=region_support(lm.adapter),
        generate=bool(torch.isfinite(rec.mass).all()),
        oracle_error=max(read_error, *errors.values()),
    )


def test_support_matrix_has_a_row_per_family():
    rows = [family_support(family) for family in ("internvl", "aya_vision")]
    table = support_matrix(rows).splitlines()
    assert table[0] == "| " + " | ".join(MATRIX_COLUMNS) + " |" and len(table) == 2 + len(rows)
    assert table[2].startswith("| aya_vision | yes | yes | yes | no: generic adapter")
    assert table[3].startswith("| internvl | yes | yes | yes | yes: InternVL | yes | ")


if __name__ == "__main__":
    print(support_matrix([family_support(family) for family in sorted(CONFIGS)]), end="")
