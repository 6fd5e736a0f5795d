"""The claims' rules and the one verdict rule against random sets, on small tables with known answers."""

import pandas as pd
import pytest

from helpers.studies import claims
from helpers.studies.verdicts import BEATS, BELOW_MINIMUM, WITHIN, versus_random, z_estimable


def _fixture_tables(out_dir, cers_p=0.2, holm_p=0.048, cers_r=20, random_sd=(0.01, 0.02), shares=None):
    """Small tables of the shape notebooks 02-05 write, with chosen numbers (k = 10)."""
    shares = shares or {"source": 0.45, "query": 0.6, "corpus": 0.8, "half-split": 0.95}
    pd.DataFrame(
        {
            "comparison": list(shares),
            "median overlap": [10 * v for v in shares.values()],
            "min": [10 * v - 0.5 for v in shares.values()],
            "max": [10 * v + 0.5 for v in shares.values()],  # half-split noise: 0.5 heads = 5 per 100
            "median share of k": list(shares.values()),
        }
    ).to_csv(out_dir / "table01_overlap_by_factor.csv", index=False)
    pd.DataFrame({"comparison": ["qsp - last"], "mean difference": [0.09], "p (paired t)": [1e-9]}).to_csv(
        out_dir / "ncs_source_contrast.csv", index=False
    )
    settings = ["cm-ord-last", "co-ref-qsp"]
    pd.DataFrame(
        {
            "setting": settings,
            "S": [0.1, 0.5],
            "random mean": [0.0, 0.45],
            "R": cers_r,
            "p": [cers_p, 0.5],
            "any-layer min": 0.0,
            "any-layer max": 0.3,
        }
    ).to_csv(out_dir / "table03_cers.csv", index=False)
    pd.DataFrame(
        {"setting": settings, "S": [0.02, 0.4], "R": [20, 250], "p": [0.3, 1 / 251], "p Holm": [1, 0.05]}
    ).to_csv(out_dir / "table03_ncs.csv", index=False)
    pd.DataFrame(
        {
            "setting": ["cm-ref-qsp", "co-ref-qsp"],
            "R": 250,
            "S": [0.3, 0.4],
            "random mean": 0.0,
            "random sd": list(random_sd),
            "p": 1 / 251,
            "z": [30.0, 1000.0],
            "z capped": [False, True],
            "p Holm (12 settings)": [holm_p, holm_p],
            "Holm R's": "20 (10 settings), 250 (2 settings)",
        }
    ).to_csv(out_dir / "table10_large_r.csv", index=False)


def _holds(out_dir) -> dict:
    return claims.claims(out_dir).set_index("claim")["holds"].to_dict()


def test_claims_on_fixture_tables_give_the_expected_verdicts(tmp_path):
    _fixture_tables(tmp_path)
    table = claims.claims(tmp_path).set_index("claim")
    assert table.loc["source overlap", "this run"] == pytest.approx(45.0)
    assert table.loc["ref-qsp far above random", "this run"] == 30.0
    assert table.loc["Holm across 12 settings", "this run"] == 0.048
    assert "cm-ref-qsp p 0.048, effect 0.300: beats random" in table.loc["Holm across 12 settings", "detail"]
    assert table.loc["any-layer sets span S", "this run"] == 1.0  # 0.5 lies above the any-layer max
    expected = {
        "source overlap": "yes",
        "query overlap": "yes",
        "corpus overlap": "yes",
        "half-split overlap": "yes",
        "necessity follows the source": "yes",
        "ref-qsp far above random": "yes",
        "Holm across 12 settings": "yes",
        "no steering advantage": "yes",
        "any-layer sets span S": "no",
    }
    assert table["holds"].to_dict() == expected
    assert table.loc["ref-qsp far above random", "paper"] == "17-19 (from its rounded Table 10: 16.3, 18.1)"

    _fixture_tables(tmp_path, cers_p=1 / 21, holm_p=0.571)
    holds = _holds(tmp_path)
    assert holds["no steering advantage"] == "no" and holds["Holm across 12 settings"] == "no"

    _fixture_tables(tmp_path, cers_r=3)  # p = .2 is above .14 even at the floor 1/4: the claim cannot fail there
    assert _holds(tmp_path)["no steering advantage"] == "not testable here (see detail)"


def test_a_capped_z_at_float_noise_is_not_estimable_never_holding(tmp_path):
    _fixture_tables(tmp_path, random_sd=(0.01, 0.0001))  # co-ref-qsp's random sets barely vary: z capped
    row = claims.claims(tmp_path).set_index("claim").loc["ref-qsp far above random"]
    assert row["holds"] == "not testable here (see detail)"
    assert "co-ref-qsp: z not estimable (random SD 0.0001 < 0.001)" in row["detail"]
    assert not z_estimable(0.0001) and z_estimable(0.001)


def test_about_half_checks_the_level_and_the_ordering_separately(tmp_path):
    # below the corpus overlap but far from half: the level fails although the ordering holds
    _fixture_tables(tmp_path, shares={"source": 0.227, "query": 0.6, "corpus": 0.864, "half-split": 0.95})
    row = claims.claims(tmp_path).set_index("claim").loc["source overlap"]
    assert row["holds"] == "no" and "outside 35-65" in row["detail"] and "order: below corpus" in row["detail"]


def test_a_half_split_margin_within_its_noise_does_not_hold(tmp_path):
    # half-split 95 vs corpus 92 per 100: above it by 3, less than the half-split noise (5 per 100)
    _fixture_tables(tmp_path, shares={"source": 0.45, "query": 0.6, "corpus": 0.92, "half-split": 0.95})
    row = claims.claims(tmp_path).set_index("claim").loc["half-split overlap"]
    assert row["holds"] == "no" and "3.0 <= the half-split noise 5.0" in row["detail"]


def test_an_effect_below_the_minimum_never_beats_random(tmp_path):
    assert versus_random(0.048, 0.0001) == BELOW_MINIMUM  # rank p at its floor, effect invisible at 3 decimals
    assert versus_random(0.048, 0.01) == BEATS
    assert versus_random(0.2, 0.5) == WITHIN
    assert versus_random(1e-6, 0.0) == BELOW_MINIMUM  # a tie at float noise
    _fixture_tables(tmp_path, cers_p=1 / 21)  # cm-ord-last S 0.1 vs random 0.0 at p .048: beats
    assert _holds(tmp_path)["no steering advantage"] == "no"
    tables = pd.read_csv(tmp_path / "table03_cers.csv")
    tables["random mean"] = tables["S"] - 0.0001  # the same p, but S only 1e-4 above its random sets
    tables.to_csv(tmp_path / "table03_cers.csv", index=False)
    assert _holds(tmp_path)["no steering advantage"] == "yes"


def test_settings_at_the_floor_are_counted_at_the_tables_precision(tmp_path):
    table = pd.DataFrame({"R": [20, 20, 250, 100, 20], "p": [0.048, 0.095, 0.004, 0.010, 0.571]})  # as written
    assert claims._at_floor(table) == "3 of 5"


def test_results_md_holds_the_claims_and_headlines(tmp_path):
    _fixture_tables(tmp_path)
    path = claims.write_results(tmp_path, claims.claims(tmp_path), "fixture run")
    text = path.read_text()
    assert path.name == "RESULTS.md" and "fixture run" in text
    assert text.count("\n| ") >= 9 + 7  # nine claims, seven headline rows
    assert "z = 1000.0 (capped)" in text and "0.400 (co-ref-qsp, p = 0.004 at R = 250)" in text


def test_a_claim_a_run_cannot_test_says_why_without_reading_its_table(tmp_path):
    _fixture_tables(tmp_path)
    tables = {name: pd.read_csv(tmp_path / f"{name}.csv") for name in claims.TABLES}
    del tables["table03_cers"]  # 06 steers against one draw: no Table 3 CERS
    why = "one draw per set"
    table = claims.claim_rows(tables, untested={"no steering advantage": why, "any-layer sets span S": why}).set_index(
        "claim"
    )
    assert table.loc["no steering advantage", "holds"] == "not testable here (see detail)"
    assert table.loc["no steering advantage", "detail"] == why
    assert table.loc["source overlap", "holds"] == "yes"  # the others are judged as before
