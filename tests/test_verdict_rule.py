"""Every verdict against random sets comes from one function (helpers.measures.verdicts.versus_random): no module
or notebook that prints or colours a verdict compares a p-value, alpha or the minimum effect by itself."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The modules that print, colour or write a verdict: tables, figures, sentences, claims, the card, the notebooks.
SCOPE = ("helpers/studies/*.py", "helpers/studies/*/*.py", "helpers/figures/*.py", "notebooks/*.py")
RULE = "helpers/measures/verdicts.py"
# The calls of `exceeds` outside the rule that are no verdict against random sets: {module: (count, why)}.
ALLOWED_EXCEEDS = {
    "helpers/studies/findings.py": (1, "generic_damage_sentence: a damage set's own NCS against the clean model"),
}
P_NAME = re.compile(r"^(p|p_\w+|\w+_p|pvalue|adjusted)$")  # names that hold a p-value
P_KEY = re.compile(r"^(p|p Holm.*|p \(.*|.* p|.* p Holm|.* p [AB]|p [AB]|pvalue|p m(in|ax) .*)$")  # columns
THRESHOLDS = {"ALPHA", "MIN_EFFECT", "alpha", "minimum"}
THRESHOLD_VALUES = {0.05, 0.14, 0.01}
OUTCOMES = {"BEATS", "WITHIN", "NOT_INTERPRETABLE", "PASS", "FAIL", "NOT_RUN"}


def _mentions_p_or_threshold(node: ast.AST) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and (P_NAME.match(n.id) or n.id in THRESHOLDS):
            return True
        if isinstance(n, ast.Attribute) and (n.attr in ("p", "pvalue") or n.attr in THRESHOLDS):
            return True
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and P_KEY.match(n.value):
            return True
        if isinstance(n, ast.Constant) and isinstance(n.value, float) and n.value in THRESHOLD_VALUES:
            return True
    return False


def _is_outcome(node: ast.AST) -> bool:
    return isinstance(node, ast.Name | ast.Attribute) and (getattr(node, "id", None) or node.attr) in OUTCOMES


def bypasses(source: str) -> list[str]:
    """Each comparison of a p-value or of a verdict threshold, and each call of `exceeds`, in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        membership = isinstance(node, ast.Compare) and all(isinstance(op, ast.In | ast.NotIn) for op in node.ops)
        if isinstance(node, ast.Compare) and not membership and _mentions_p_or_threshold(node):
            sides = [node.left, *node.comparators]
            if not any(_is_outcome(side) for side in sides):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name == "exceeds":
                found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_scan_finds_the_bypasses_it_is_for():
    assert len(bypasses('colours = ["red" if p <= 0.05 else "blue" for p in table["p Holm"]]')) == 1
    assert len(bypasses('above = r["p"] == 1 / values.shape[1]')) == 1
    assert len(bypasses('beats = sum(verdicts.exceeds(r["S"] - r["random mean"]) for r in rows)')) == 1
    assert len(bypasses("holds = p < ALPHA and difference >= MIN_EFFECT")) == 2
    assert not bypasses("beats = [n for n, c in zip(names, calls) if c.outcome == BEATS]")
    assert not bypasses('table["verdict"] = [judge(row, "p Holm", 12).outcome for row in rows]')


def test_no_module_that_prints_or_colours_a_verdict_decides_on_p_or_effect_by_itself():
    paths = sorted({p for pattern in SCOPE for p in ROOT.glob(pattern)})
    assert len(paths) > 20  # the scope is found
    found = {}
    for path in paths:
        name = path.relative_to(ROOT).as_posix()
        if name == RULE:
            continue
        hits = bypasses(path.read_text())
        calls = [h for h in hits if "exceeds(" in h]
        if len(calls) <= ALLOWED_EXCEEDS.get(name, (0, ""))[0]:
            hits = [h for h in hits if h not in calls]
        if hits:
            found[name] = hits
    assert not found, f"decided outside {RULE}: {found}"


def test_the_masking_table_says_no_masking_can_change_a_verdict_below_the_holm_floor():
    from helpers.studies.controls.masking import masking_sentence, masking_table

    row = {"S low": 0.6, "S high": 0.8, "random sd": 0.0001, "random min": 0.0, "random max": 0.0003, "z": 1000.0}
    rows = [
        {"masking": m, "setting": s, "S": ncs, "random mean": 0.0001, "R": r, "p": 1 / (r + 1), **row}
        | {"of it from the image": 0.0}
        for m, r in (("hide", 20), ("query_zero (last row)", 20))
        for s, ncs in (("cm-ref-qsp", 0.7), ("co-ref-qsp", 0.6), ("co-ord-last", 0.3))
    ]
    table = masking_table(rows)  # Holm across 3 at R = 20: floor 3/21 = .143, where the old rule said "within"
    assert set(table["verdict"]) == {"not interpretable"}
    assert set(table["verdict reason"]) == {"Holm floor above alpha"}
    assert "no set's verdict is interpretable (Holm floor above alpha at R = 20 for 3 sets)" in masking_sentence(table)
    beating = masking_table([dict(r, R=60, p=1 / 61) for r in rows])  # floor 3/61 = .049
    assert set(beating["verdict"]) == {"beats random"}
    assert "under hide, 3 of 3 sets beat their random sets: query_zero (last row) changes no verdict" in (
        masking_sentence(beating)
    )


def test_a_table_of_verdicts_prints_the_same_with_inputs_perturbed_at_1e_7():
    import numpy as np
    import pandas as pd

    from helpers.measures.stats import against_random, holm
    from helpers.measures.verdicts import judge

    rng = np.random.default_rng(6)
    runs = {  # per-item values [N, 1 + R]: S tied with random sets at 0, S far above, S among varying random sets
        "tied at 0": np.zeros((30, 21)),
        "above": np.hstack([np.full((30, 1), 0.7), rng.uniform(0, 0.002, (30, 20))]),
        "among": rng.uniform(0, 0.3, (30, 21)),
    }

    def printed(noise: float) -> str:
        rows = []
        for setting, values in runs.items():
            shifted = values + noise * rng.random(values.shape)  # up to `noise`, upward: a -1e-7 prints as -0.000
            rows.append({"setting": setting, **against_random(shifted[:, 0], shifted[:, 1:])})
        table = pd.DataFrame(rows)
        table["p Holm"] = holm(table["p"].to_numpy())
        table["verdict"] = [judge(row, "p Holm", len(table)).outcome for row in table.to_dict("records")]
        return table.to_csv(index=False, float_format="%.3f")

    assert printed(0.0) == printed(1e-7) == printed(1e-7)
