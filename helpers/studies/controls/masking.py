"""The field's masking implementations side by side (notebook 05's masking table, issue 40).

For each masking of MASKING_VARIANTS (helpers.engine.masking.MASKINGS at the rows each is credited with) and each
chosen discovered set: NCS of S and of its layer-matched random sets with the image masked from the heads that way (the
paper's "hide" row is notebook 04's run, read back from the cache), the verdict by `verdicts.judge` on the rank p
Holm-adjusted across the chosen sets within a masking (not interpretable where that Holm floor is above .05: then
no masking can change a verdict), and the masking's leak on the first matched item: how much it changes the logits
at the rows before the image, how much of that comes from the image itself (a causal mask gives 0), and the
attention mass the masked heads place on later positions (from the masking's definition, helpers.engine.leak:
not read from the attention weights).
"""

import numpy as np
import pandas as pd
import torch

from helpers.engine import leak
from helpers.engine.head_sets import on_device
from helpers.engine.inputs import item_batch
from helpers.measures.control_schemes import distinct_columns
from helpers.measures.controls import with_controls
from helpers.measures.names import MASKING_VARIANTS
from helpers.measures.necessity import ncs
from helpers.measures.stats import against_random, holm
from helpers.measures.verdicts import BEATS, NOT_INTERPRETABLE, judge
from helpers.stimuli.corpora import items_of
from helpers.studies.evaluation import Evaluation


def masking_rows(evaluation: Evaluation, sets: dict[str, np.ndarray], controls: dict[str, np.ndarray]) -> list[dict]:
    """One row per masking (MASKING_VARIANTS) x setting: NCS of S against its random sets (`controls[setting]`
    [R, L, H]) and the masking's leak for S on the first matched item of the evaluation corpus."""
    (item,) = items_of("single_matched", evaluation.corpus, 1, evaluation.seed)
    inputs = on_device(evaluation.lm, item_batch(evaluation.lm.processor, item).inputs)
    last = torch.zeros_like(inputs["input_ids"], dtype=torch.bool)
    last[:, -1] = True  # the one-item input has no pads: its last row reads the answer
    rows = []
    for label, (masking, row_group) in MASKING_VARIANTS.items():
        for setting, head_set in sets.items():
            stack = with_controls(head_set, controls[setting])
            values = ncs(evaluation.mask(stack, row_group=row_group, masking=masking))  # [N, 1 + R]
            leak_rows = last if row_group == "last" else "all"
            measured = leak(evaluation.lm, inputs, torch.as_tensor(head_set), masking, query_rows=leak_rows)
            row = against_random(values[:, 0], values[:, 1:], distinct_columns(controls[setting]))
            rows.append(
                {
                    "masking": label,
                    "setting": setting,
                    **{k: row[k] for k in MASKING_ROW_KEYS},
                    "logit change before the image": measured.logits,
                    "of it from the image": measured.from_image,
                    "mass on later positions per row (by definition)": measured.future_mass_per_row,
                }
            )
    return rows


MASKING_ROW_KEYS = (
    "S",
    "S low",
    "S high",
    "random mean",
    "random sd",
    "random min",
    "random max",
    "R",
    "distinct",
    "p",
    "z",
)


def masking_table(rows: list[dict]) -> pd.DataFrame:
    """The rows with Holm across the settings of each masking and the verdict of `verdicts.judge` on it, with
    its reason."""
    table = pd.DataFrame(rows)
    table.insert(table.columns.get_loc("p") + 1, "p Holm", table.groupby("masking")["p"].transform(holm))
    n_tests = table.groupby("masking")["setting"].transform("size")
    calls = [judge(row, "p Holm", int(n)) for row, n in zip(table.to_dict("records"), n_tests)]
    table.insert(table.columns.get_loc("p Holm") + 1, "verdict", [c.outcome for c in calls])
    table.insert(table.columns.get_loc("verdict") + 1, "verdict reason", [c.reason for c in calls])
    return table


def masking_sentence(table: pd.DataFrame, reference: str = "hide") -> str:
    """Which implementations change a set's verdict relative to `reference` (or, where no verdict under `reference`
    is interpretable, only how far they move the NCS), and which leak the image into the rows before it."""
    verdicts = table.pivot(index="setting", columns="masking", values="verdict")
    ncs = table.pivot(index="setting", columns="masking", values="S")
    reference_rows = table[table.masking == reference]
    unread = bool((reference_rows.verdict == NOT_INTERPRETABLE).all())
    parts = []
    for masking in [m for m in dict.fromkeys(table.masking) if m != reference]:
        gap = f"largest NCS change {float((ncs[masking] - ncs[reference]).abs().max()):.3f}"
        changed = [
            f"{s} ({verdicts.loc[s, reference]} -> {verdicts.loc[s, masking]})"
            for s in verdicts.index
            if verdicts.loc[s, masking] != verdicts.loc[s, reference]
        ]
        if unread:
            parts.append(f"{masking}: {gap}")
        else:
            said = f"changes the verdict of {', '.join(changed)}" if changed else "changes no verdict"
            parts.append(f"{masking} {said} ({gap})")
    leaking = table.groupby("masking", sort=False)["of it from the image"].max()
    leaks = [f"{m} ({v:.3g})" for m, v in leaking.items() if v > 0]
    beats = int((reference_rows.verdict == BEATS).sum())
    said = f"under {reference}, {beats} of {verdicts.shape[0]} sets beat their random sets"
    if unread:
        reasons = ", ".join(dict.fromkeys(reference_rows["verdict reason"]))
        said = (
            f"under {reference}, no set's verdict is interpretable ({reasons} at R = {int(table['R'].max())} for "
            f"{verdicts.shape[0]} sets), so no implementation can change one; the NCS they give"
        )
    return (
        f"This run: {said}: "
        + "; ".join(parts)
        + ". Rows before the image change with the image itself (a leak) under: "
        + (", ".join(leaks) if leaks else "none")
        + "."
    )
