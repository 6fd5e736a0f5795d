"""The artefact index (helpers/runner/artefacts.py) and the generated Tables 28 and 29 (protocol_tables.py)."""

import re
from pathlib import Path

import pytest

from helpers.measures.overlap import COMBINATIONS
from helpers.runner import artefacts
from helpers.runner.protocol_tables import conversion_table, protocol_table
from helpers.runner.steps import STEPS
from helpers.storage.reference import reference

SEED = Path("/work/shared/seeds/000_61aab609fec6d45b.txt")  # the paper's flattened text, where present
# The figures and tables the paper's text names: Figure 4 and Table 7 are not among them.
EXPECTED = {f"Figure {i}" for i in (1, 2, 3, 5, 6, 7, 8)} | {f"Table {i}" for i in range(1, 30) if i != 7}


def _named_in(text: str) -> set[str]:
    """Ids named in the text: 'Figure 2', 'Fig. 5', 'Table 3', 'Tables 1 , 20', 'Table 4 , 14 , Fig. 5'."""
    ids = set()
    for kind, numbers in re.findall(r"\b(Figure|Fig\.|Tables?)\s+(\d+(?:\s*,\s*\d+)*)", text):
        label = "Figure" if kind.startswith("Fig") else "Table"
        ids |= {f"{label} {n}" for n in re.findall(r"\d+", numbers)}
    return ids


def test_the_registry_covers_every_figure_and_table_the_paper_names():
    ids = [a.id for a in artefacts.ARTEFACTS]
    assert len(ids) == len(set(ids)) == 35
    assert set(ids) == EXPECTED
    if SEED.is_file():
        assert _named_in(SEED.read_text()) == EXPECTED


def test_every_entry_lists_declared_outputs_and_a_status_with_its_reason():
    declared = {name for step in STEPS.values() for name in step.writes}
    for a in artefacts.ARTEFACTS:
        assert a.status in artefacts.STATUSES, a.id
        assert set(a.outputs) <= declared, a.id
        assert bool(a.outputs) == (a.status != artefacts.NOT), a.id  # a regenerated artefact names its files
        if a.status != artefacts.FULL:
            assert a.note, f"{a.id}: a {a.status} artefact says what is missing or why"
    assert artefacts.files_of("fig02_overlap_matrix") == [
        f"fig02_overlap_matrix{s}" for s in (".png", ".pdf", ".csv", ".tex")
    ]


def test_the_index_names_a_file_missing_from_the_run(tmp_path, capsys):
    fig2 = artefacts.by_id()["Figure 2"]
    table3 = artefacts.by_id()["Table 3"]
    for f in fig2.files + table3.files:
        (tmp_path / f).write_text("x")
    (tmp_path / "table03_ncs.tex").unlink()
    tally = artefacts.write_index(tmp_path)
    assert "35 artefacts" in capsys.readouterr().out
    text = (tmp_path / artefacts.INDEX).read_text()
    rows = {line.split(" | ")[0].removeprefix("| "): line for line in text.splitlines() if line.startswith("| ")}
    assert "missing" not in rows["Figure 2"]
    assert "missing from this run: table03_ncs.tex" in rows["Table 3"]
    assert "table03_cers.csv" not in rows["Table 3"].split("missing from this run")[1]
    assert "missing from this run" not in rows["Table 4"]  # it lists no file
    n = len(artefacts.ARTEFACTS)
    assert tally["with files missing"] == n - 2
    assert tally["full"] + tally["partial"] + tally["not regenerated"] == n
    assert f"{tally['full']} full, {tally['partial']} partial, {tally['not regenerated']} not regenerated" in text


def test_tables_5_6_16_21_name_what_makes_them_whole():
    entries = artefacts.by_id()
    # Tables 6 and 16: one region-contrast run in 04, written as both tables; 06 repeats the computation per model
    assert entries["Table 6"].notebooks == ["04_ncs"] and entries["Table 16"].notebooks == ["04_ncs", "06_cross_model"]
    assert "table16_region_contrast.csv" in STEPS["04_ncs"].output_files()
    assert "table16_region_contrast_models.csv" in STEPS["06_cross_model"].output_files()
    assert "largest attainable" in entries["Table 6"].note
    # Table 5's per-layer half lives in table05_ncs_rows, which needs 01's per-layer sets
    assert "per layer" in entries["Table 5"].note
    assert any("_per_layer" in f for f in STEPS["04_ncs"].data_reads)
    for name in ("Table 5", "Table 6", "Table 13", "Table 16", "Table 21"):
        assert entries[name].status == artefacts.FULL, name
    assert "top-ceil(k / L) per layer" in entries["Table 5"].note  # per-layer sets at least as large as k
    # partial, and INDEX.md says what each lacks: 11 of the paper's 14 tasks, the paper's own N and R
    lacking = {"Table 25": "at most 11 of 14", "Table 27": "at most 11 of 14", "Table 28": "N 120, R 100"}
    for name, lacks in lacking.items():
        assert entries[name].status == artefacts.PARTIAL and lacks in entries[name].note, name
    # the paper's Table 21 rows (ord-out, ref-out) are rows of the crossover table
    assert set(reference("table21_crossover_top20")["combination"]) <= set(COMBINATIONS)


def test_the_index_is_declared_by_07_and_tables_28_29_by_00():
    # 07 writes it; the runner rewrites it once every notebook of the run is done (helpers/run.py main)
    assert [name for name, step in STEPS.items() if "INDEX.md" in step.output_files()] == ["07_protocol"]
    assert {"table28_protocol.csv", "table29_conversion.csv"} <= set(STEPS["00_design"].output_files())


def test_table_28_holds_the_papers_rows_with_its_sizes_under_the_paper_profile():
    table = protocol_table().set_index("result")
    paper = reference("table28_protocol").set_index("result")
    assert set(paper.index) <= set(table.index)
    rows = table.loc[paper.index]
    same = rows["N (paper profile)"].astype(int) == paper["paper_N"]
    assert set(paper.index[~same]) == {"Tables 2, 21; Fig. 7"}, rows["N (paper profile)"]  # 01's strips: 400
    assert (rows["R (paper profile)"].astype(str) == paper["paper_R"].astype(str)).all(), rows["R (paper profile)"]
    assert "160" in table.loc["Table 4, 14, Fig. 5", "head-set"]


def test_table_29_lists_every_benchmark_of_the_converters_registry():
    table = conversion_table()
    paper = reference("table29_conversion")
    assert set(table.benchmark) == set(paper.benchmark)
    merged = table.merge(paper, on="benchmark")
    assert all(p.startswith(r) for r, p in zip(merged.recipe, merged.paper_recipe, strict=True))


@pytest.mark.parametrize("text, ids", [("Tables 1 , 20 (noise ceiling)", {"Table 1", "Table 20"}),
                                       ("Table 4 , 14 , Fig. 5", {"Table 4", "Table 14", "Figure 5"})])  # fmt: skip
def test_ids_are_read_from_lists(text, ids):
    assert _named_in(text) == ids
