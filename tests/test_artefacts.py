"""The artefact index (helpers/runner/artefacts.py) and the generated Tables 28 and 29 (protocol_tables.py)."""

import os
import re
from pathlib import Path

import pytest

from helpers.measures.overlap import COMBINATIONS
from helpers.runner import artefacts
from helpers.runner.protocol_tables import conversion_table, protocol_table
from helpers.runner.steps import STEPS
from helpers.stimuli.design import SETTINGS
from helpers.storage.paths import REFERENCE, ROOT
from helpers.storage.reference import reference

# The paper's flattened text, where present: $PAPER_TEXT, else the seed text beside the checkout
SEED = Path(os.environ.get("PAPER_TEXT", ROOT.parent / "shared" / "seeds" / "000_61aab609fec6d45b.txt"))
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
    lacking = {"Table 25": "at most 11 of 14", "Table 27": "at most 11 of 14", "Table 28": "N 400, the paper: 200"}
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


def _seed_cells(setting: str) -> list[str]:
    """Table 5's five cells of `setting` in the seed text (the lines after its name, minus signs as '-')."""
    lines = SEED.read_text().splitlines()
    start = lines.index("CERS / random ( p )")  # the right half's last header, just before the rows
    at = lines.index(setting, start)
    return [" ".join(line.replace("−", "-").split()) for line in lines[at + 1 : at + 6]]


def _numbers(cell: str) -> list[float]:
    """The numbers of a seed cell, in order: '.229 / - .091 (.29)' -> [0.229, -0.091, 0.29]."""
    return [float(n.replace(" ", "")) for n in re.findall(r"-? ?\d*\.\d+", cell)]


@pytest.mark.skipif(not SEED.is_file(), reason="the paper's seed text is not on this machine")
def test_table_5_both_halves_are_transcribed_from_the_seed_text():
    paper = reference("table05_ncs_rows").set_index("setting")
    assert list(paper.index) == ["co-ref-qsp", "co-ord-qsp", "co-ref-last", "co-ord-last"]
    for setting, row in paper.iterrows():
        flat_all, prompt, last, per_layer, cers = _seed_cells(setting)
        estimates = [_numbers(cell)[0] for cell in (flat_all, prompt, last, per_layer)]  # each before its CI
        assert estimates == [row.paper_all, row.paper_prompt, row.paper_last, row.paper_per_layer_NCS], setting
        expected = [row.paper_per_layer_CERS, row.paper_per_layer_CERS_random_mean, row.paper_per_layer_CERS_p]
        assert _numbers(cers) == expected, setting


# Words by which an INDEX note states a fact about the paper (what its text holds, its numbers, a mismatch with
# them): every note that uses one is read by test_every_notes_claims_about_the_paper_hold.
CLAIMS_ABOUT_THE_PAPER = re.compile(r"seed text|the paper: |paper values|the paper's table|the text lists|paper's \d+")


def _mismatched_protocol_rows() -> dict[str, str]:
    """Table 28's rows whose paper-profile N or R differ from the paper's: result -> 'N 400, the paper: 200'."""
    table = protocol_table().set_index("result")
    paper = reference("table28_protocol").set_index("result")
    found = {}
    for result, row in paper.iterrows():
        ours = table.loc[result]
        for size, column in (("N", "paper_N"), ("R", "paper_R")):
            if str(ours[f"{size} (paper profile)"]) != str(row[column]):
                found[result] = f"{size} {ours[f'{size} (paper profile)']}, the paper: {row[column]}"
    return found


def test_every_notes_claims_about_the_paper_hold():
    notes = {a.id: a.note for a in artefacts.ARTEFACTS}
    seed = SEED.read_text() if SEED.is_file() else None
    checked = set()
    # absent from the seed text: no reference table of theirs, and (where the seed is here) no caption
    for name, stem in (("Table 2", "table02"), ("Table 4", "table04"), ("Figure 5", "fig05")):
        assert "seed text has no" in notes[name] or "not in the seed text" in notes[name] or "neither" in notes[name]
        assert not list(REFERENCE.glob(f"{stem}_*.csv")), name
        assert seed is None or not re.search(rf"^{name}:", seed, re.M), name
        checked.add(name)
    # Table 3: "CERS for the 4 rows in the seed text; NCS for 10 of 12 rows"
    n_cers, n_ncs, n_rows = map(
        int, re.search(r"CERS for the (\d+) rows.*NCS for (\d+) of (\d+)", notes["Table 3"]).groups()
    )
    assert reference("table03_cers")["paper_S"].notna().sum() == n_cers
    assert reference("table03_ncs")["paper_NCS"].notna().sum() == n_ncs and n_rows == len(SETTINGS)
    # Table 5: both halves' paper values are in the reference data (the seed gives them)
    assert "paper's values of both halves" in notes["Table 5"] and "not in the seed" not in notes["Table 5"]
    assert reference("table05_ncs_rows").notna().all().all()
    # Table 14: the k with paper values, and none at 160
    ks = [int(k) for k in re.search(r"k = ([\d, ]+) as the paper's table", notes["Table 14"]).group(1).split(", ")]
    assert (
        sorted(set(reference("table14_ncs_vs_k")["paper_k"])) == ks and "no paper values at 160" in notes["Table 14"]
    )
    # Table 21 and Table 28: the paper's N of the crossover strips; the one row where the paper profile differs
    paper_n = int(re.search(r"the paper: (\d+)\)", notes["Table 21"]).group(1))
    assert reference("table28_protocol").set_index("result").loc["Tables 2, 21; Fig. 7", "paper_N"] == paper_n
    mismatches = _mismatched_protocol_rows()
    assert mismatches == {"Tables 2, 21; Fig. 7": "N 400, the paper: 200"}
    assert all(f"{result}: {what}" in notes["Table 28"] for result, what in mismatches.items())
    # Table 29: "the text lists six benchmarks"
    assert "the text lists six benchmarks" in notes["Table 29"] and len(reference("table29_conversion")) == 6
    # Figure 7 and Tables 25-27: the paper's eight further models and its 14 pointing tasks
    assert "the paper: eight further models" in notes["Figure 7"]
    assert seed is None or "on eight further models" in re.search(r"^Figure 7:.*$", seed, re.M).group(0)
    for name in ("Table 25", "Table 26", "Table 27"):
        assert "the paper's 14 tasks" in notes[name], name
    assert seed is None or re.search(r"^Table 25: The 14 tasks", seed, re.M)
    checked |= {"Table 3", "Table 5", "Table 14", "Table 21", "Table 28", "Table 29", "Figure 7"}
    checked |= {"Table 25", "Table 26", "Table 27"}
    claiming = {name for name, note in notes.items() if CLAIMS_ABOUT_THE_PAPER.search(note)}
    assert claiming <= checked, f"notes stating a fact about the paper that no check reads: {claiming - checked}"


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
