"""Every generated sentence a published notebook prints re-generates identically from the tables it published: a
reader holding only paper_figures/'s CSVs gets the same words and numbers (helpers/studies/findings.py).

`SENTENCES_RUN` names another run folder (a smoke run's, say) to check instead of paper_figures/.
"""

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from helpers.storage.paths import PAPER_FIGURES
from helpers.studies import findings

RUN = Path(os.environ.get("SENTENCES_RUN", PAPER_FIGURES))

# notebook -> (the sentence function, the table it reads)
SENTENCES = [
    ("02_overlap", findings.split_agreement_sentence, "table01_overlap_by_factor"),
    ("03_cers", lambda t: findings.versus_random_sentence(t, "CERS"), "table03_cers"),
    ("03_cers", findings.beta_sweep_sentence, "table18_cers_vs_beta"),
    ("04_ncs", lambda t: findings.versus_random_sentence(t, "NCS"), "table03_ncs"),
    ("04_ncs", findings.ncs_rows_sentence, "table05_ncs_rows"),
    ("04_ncs", findings.region_contrast_sentence, "table16_region_contrast"),
    ("05_controls", findings.rank_p_sentence, "table09_rank_p"),
    ("05_controls", findings.generic_damage_sentence, "table12_generic_damage"),
    ("05_controls", findings.ncs_rows_groups_sentence, "table13_ncs_rows"),
    ("05_controls", findings.ncs_vs_k_sentence, "table14_ncs_vs_k"),
    ("05_controls", findings.shared_heads_sentence, "table15_shared_heads"),
    ("05_controls", findings.mass_cers_sentence, "table17_mass_cers"),
    ("06_cross_model", findings.per_model_sentence, "table19_second_model"),
    ("06_cross_model", findings.region_contrast_sentence, "table16_region_contrast_models"),
    ("08_methods", findings.methods_validation_sentence, "methods_validation"),
    ("08_methods", findings.methods_damage_sentence, "methods_validation"),
]


def _printed(notebook: str) -> str:
    """Everything the executed notebook printed (its stream outputs)."""
    cells = json.loads((RUN / "notebooks" / f"{notebook}.ipynb").read_text())["cells"]
    return "".join(
        "".join(output.get("text", ""))
        for cell in cells
        for output in cell.get("outputs", [])
        if output.get("output_type") == "stream"
    )


@pytest.mark.parametrize("notebook, sentence, table", SENTENCES, ids=lambda v: v if isinstance(v, str) else "")
def test_a_printed_sentence_regenerates_from_its_published_table(notebook, sentence, table):
    if not (RUN / "notebooks" / f"{notebook}.ipynb").is_file():
        pytest.skip(f"{notebook} is not in {RUN}")
    text = sentence(pd.read_csv(RUN / f"{table}.csv"))
    assert text in _printed(notebook), text
