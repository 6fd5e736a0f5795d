"""The generated sentences (helpers/studies/findings.py) and the tables they read, on small tables with known
answers: each sentence names what the verdict rule (verdicts.versus_random) decides and the numbers."""

import numpy as np
import pandas as pd

from helpers.measures.overlap import crossover_overlaps
from helpers.studies import findings
from helpers.studies.region_contrast import ATTAINABLE, measure_columns, region_contrast_table

GRID = {"grid oracle": 0.95, "grid blank": 0.25, "grid audit": "passes"}


def _runs(effects: dict[str, float], n_items: int = 10, n_random: int = 19) -> dict:
    """Per-item [N, 1 + R] runs: S at `effect` (+ a small item spread), random sets spread around 0."""
    rng = np.random.default_rng(0)
    out = {}
    for s, effect in effects.items():
        random = rng.normal(0, 0.002, (n_items, n_random))
        values = np.concatenate([effect + rng.normal(0, 0.001, (n_items, 1)), random], axis=1)
        out[s] = {"NCS_grid": values, "symmetric CERS": values * 0}  # symmetric CERS: S ties every random set
    return out


def test_region_contrast_table_gives_each_measure_against_random_with_the_attainable_and_the_audit():
    table = region_contrast_table(_runs({"cm-ord-out": 0.3, "cm-ord-last": 0.004}), 0.6, GRID)
    assert list(table["setting"]) == ["cm-ord-out", "cm-ord-last"] and (table["R"] == 19).all()
    assert (table["N"] == 10).all() and (table[ATTAINABLE] == 0.6).all() and (table["grid audit"] == "passes").all()
    out = table.set_index("setting")
    assert abs(out.loc["cm-ord-out", "NCS_grid S"] - 0.3) < 0.002 and out.loc["cm-ord-out", "NCS_grid p"] == 0.05
    table6 = measure_columns(table, "NCS_grid")
    assert {"S", "S low", "p", "random mean", ATTAINABLE, "grid audit"} <= set(table6.columns)
    assert table6.loc[0, "S"] == table.loc[0, "NCS_grid S"]


def test_region_contrast_sentence_counts_only_sets_above_the_minimum_effect_and_gives_the_attainable_share():
    table = region_contrast_table(_runs({"cm-ord-out": 0.3, "cm-ord-last": 0.004}), 0.6, GRID)
    text = findings.region_contrast_sentence(table)
    # cm-ord-last: p .05 but effect .004 < .01, named as such
    assert "NCS_grid beats random in 1 of 2: cm-ord-out (cm-ord-last at p <= 0.05 with an effect below 0.01);" in text
    assert "symmetric CERS beats random in 0 of 2: none" in text
    assert "cm-ord-out 0.300, is 50% of the largest attainable 0.600" in text
    assert "grid audit passes (oracle 0.950, blank 0.250)" in text and "R = 19" in text
    per_model = pd.concat([table.assign(model="toy"), table.assign(model="toy-b")])
    assert findings.region_contrast_sentence(per_model).count("grid audit") == 2


def test_beta_sweep_sentence_gives_s_at_every_beta():
    table = pd.DataFrame(
        {
            "setting": ["a"] * 3 + ["b"] * 3,
            "beta": [1.0, 3.0, 10.0] * 2,
            "S": [0.0, 0.004, 0.3, -0.0001, 0.0, 0.002],
        }
    )
    text = findings.beta_sweep_sentence(table)
    assert text == "This run, S's CERS at β = 1, 3, 10: a 0.000, 0.004, 0.300; b 0.000, 0.000, 0.002."


def test_ncs_rows_sentence_names_row_groups_and_the_per_layer_sets():
    row = {"R": 20, "interval": "t", "per layer heads": 12}
    rows = []
    for s, all_rows, last in (("co-ref-qsp", 0.12, 0.0), ("co-ord-last", 0.005, 0.0)):
        row_s = {"setting": s, **row}
        for group, value in (("all", all_rows), ("prompt", all_rows), ("last", last)):
            row_s |= {group: value, f"{group} random mean": 0.0, f"{group} p": 1 / 21}
        row_s |= {"per layer NCS": 0.04, "per layer NCS random mean": 0.0, "per layer NCS p": 1 / 21}
        row_s |= {"per layer CERS": 0.2, "per layer CERS random mean": 0.1, "per layer CERS p": 0.38}
        rows.append(row_s)
    text = findings.ncs_rows_sentence(pd.DataFrame(rows))
    assert "all rows co-ref-qsp; prompt rows co-ref-qsp; last rows none" in text
    assert "Top-k-per-layer sets: NCS co-ref-qsp, co-ord-last; CERS none" in text
    assert "co-ref-qsp: all 0.120, prompt 0.120, last 0.000, per layer 0.040" in text


def test_rank_p_sentence_names_the_settings_whose_call_changes_from_a_to_b():
    table = pd.DataFrame(
        {
            "setting": ["co-ref-qsp", "co-ord-last"],
            "R": 20,
            "CERS S": [0.3, 0.2],
            "CERS random A": [0.1, 0.195],  # co-ord-last: effect 0.005 < the minimum
            "CERS p A": [0.048, 0.048],
            "CERS random B": [0.35, 0.1],
            "CERS p B": [0.5, 0.048],
            "NCS S": [0.1, 0.0],
            "NCS random A": [0.0, 0.0],
            "NCS p A": [0.048, 0.6],
            "NCS random B": [0.0, 0.0],
            "NCS p B": [0.048, 0.6],
        }
    )
    text = findings.rank_p_sentence(table)
    assert "CERS: A 1 of 2 (co-ref-qsp), B 1 (co-ord-last), call changed from A to B: co-ref-qsp, co-ord-last" in text
    assert "NCS: A 1 of 2 (co-ref-qsp), B 1 (co-ref-qsp), call changed from A to B: none" in text


def test_table13_14_15_17_sentences_read_their_tables():
    table13 = pd.DataFrame(
        {
            "setting": ["co-ref-qsp"] * 2,
            "selection": ["flat", "flat"],
            "rows": ["all", "last"],
            "R": 20,
            "S": [0.12, 0.0001],
            "random mean": [0.0, 0.0],
            "p": [1 / 21, 1 / 21],
        }
    )
    text13 = findings.ncs_rows_groups_sentence(table13)
    assert "flat at all rows: co-ref-qsp (co-ref-qsp 0.120)" in text13
    assert "flat at last rows: none (co-ref-qsp 0.000)" in text13
    table14 = pd.DataFrame(
        {"setting": "co-ref-qsp", "k": [2, 4, 6], "S": [0.005, 0.1, 0.2], "random mean": 0.0, "p": 1 / 21, "R": 20}
    )
    assert "co-ref-qsp at k = 4, 6 of 2, 4, 6 (largest NCS 0.200 at k = 6)" in findings.ncs_vs_k_sentence(table14)
    table15 = pd.DataFrame(
        {
            "a": ["cm-ord-qsp", "co-ord-last"],
            "b": ["co-ord-qsp", "co-ord-out"],
            "R": 20,
            "shared excess": [0.03, np.nan],
            "shared rank p": [1 / 21, np.nan],
            "a-only excess": [0.005, 0.02],  # at p's floor, an effect below 0.01; then p = .2
            "a-only rank p": [1 / 21, 0.2],
            "b-only excess": [0.02, 0.03],
            "b-only rank p": [1 / 21, 2 / 21],
        }
    )
    text15 = findings.shared_heads_sentence(table15)
    assert "shared 1 of 1 (cm-ord-qsp / co-ord-qsp)" in text15 and "a-only 0 of 2 (none)" in text15
    assert "b-only 1 of 2 (cm-ord-qsp / co-ord-qsp)" in text15  # rank p 2/21 = .095 > .05
    table17 = pd.DataFrame(
        {
            "setting": ["a", "b"],
            "R": 20,
            "mass S": [0.3, 0.1],
            "mass random max": [0.2, 0.0996],  # b: 0.1 above 0.0996 by less than the tie tolerance
            "rho mean": [-0.4, 0.2],
        }
    )
    text17 = findings.mass_cers_sentence(table17)
    assert "above every random set's in 1 of 2 settings (a)" in text17 and "-0.40 to 0.20 (median -0.10)" in text17


def test_crossover_table_and_sentence_on_known_scores():
    n_layers, n_heads = 2, 4
    base = np.arange(n_layers * n_heads, dtype=float).reshape(n_layers, n_heads)
    scores = {}
    for c in ("ord-last", "ord-qsp", "ord-out", "ref-last", "ref-qsp", "ref-out"):
        scores[f"co-{c}"] = np.stack([base, base, base, base])  # [N = 4, L, H]: every strip ranks alike
    scores["co-ref-qsp"] = np.stack([-base] * 4)  # the opposite ranking: shares no top-2 head
    scores["co-ref-out"] = np.stack([base, base, -base, -base])  # first half ranks as base, the whole is flat
    table = crossover_overlaps(scores, "co", 2, 2).set_index("combination")
    assert table.loc["ord-out", "native ord-last"] == 2 and table.loc["ord-out", "native ref-qsp"] == 0
    assert table.loc["ord-last", "own native"] == 2 and pd.isna(table.loc["ord-out", "own native"])
    assert (table["strips"] == 2).all()
    text = findings.crossover_sentence(table.reset_index(), 2)
    assert "ord-qsp 2, ord-out 2, ref-last 2" in text and "ord-last 2, ref-qsp 2" in text
