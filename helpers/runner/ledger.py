"""The copy ledger of one runner call: gathered from the lines each notebook's processes wrote, for run.json.

A copy is one (model, item, head-set, masking, row group, keys) forward, or one item's forward under a probe call
(helpers.engine.copy_ledger); the runner gives every notebook's kernel a ledger folder (kernel_manager), where the
kernel and its chunk workers append what they computed and read back (helpers.storage.ledger). `collect` sums the lines
per notebook and per computation (copies computed, copies read back, run_head_sets and probe calls, CPU seconds, the
copies' matmul FLOPs) and counts the duplicates: copies computed more than once in the run, across notebooks included.
Each computation is a place of its own (a chunk two workers computed counts twice); the entries earlier runs computed
are one place together (the cache as this run found it: a copy two of them hold, the chunk of a stack of head-sets and
that of one set alone, was computed once), however often they are read back.
"""

import json
import os
from pathlib import Path

import numpy as np

from helpers.storage.ledger import LEDGER_ENV, NOTEBOOK_ENV

COPY = (
    "one batch row's forward under one (head-set, masking, row group, keys) intervention or one read "
    "(helpers/engine/copy_ledger.py)"
)
SUMS = ("computed", "read_back", "calls", "seconds", "copy_seconds", "flops")
EARLIER = "the cache before this run"  # the one place of every copy read back from an earlier run's entry


def kernel_manager(folder: Path, notebook: str):
    """A Jupyter kernel manager class whose kernels write their ledger lines into `folder` as `notebook`'s."""
    from jupyter_client import AsyncKernelManager

    class LedgerKernel(AsyncKernelManager):
        def start_kernel(self, **kw):
            env = {**kw.pop("env", os.environ), LEDGER_ENV: str(folder), NOTEBOOK_ENV: notebook}
            return super().start_kernel(env=env, **kw)

    return LedgerKernel


PLANNED = ".planned.json"  # the runner's plan of a notebook's copies (helpers.runner.steps), beside its lines


def write_planned(folder: Path, notebook: str, planned: int) -> None:
    """Record the copies the runner planned for `notebook` (Step.planned_forwards) in its ledger folder."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    (Path(folder) / f"{notebook}{PLANNED}").write_text(json.dumps(planned))


def collect(folder: Path) -> dict:
    """run.json's ledger from the lines under `folder`: per notebook its sums (SUMS), the copies the runner
    planned (`planned`, where it wrote them) and per computation the sums, `duplicates` (copies computed again
    after their first computation) and `duplicated` (which: first computed where, computed again where, how
    many)."""
    lines = [
        (path.name.split(".")[0], f"{path.name}:{number}", json.loads(text))
        for path in sorted(Path(folder).glob("*.jsonl"))
        for number, text in enumerate(path.read_text().splitlines())
    ]
    computed = [line for _, _, line in lines if not line.get("read")]
    parts_saved = {entry for line in computed for entry in line.get("stored", ())}  # helpers.storage.ledger.part_saved
    computed_entries = {line["entry"] for line in computed} | parts_saved
    notebooks, sources = {}, []
    for notebook, place, line in lines:
        digests = np.frombuffer(bytes.fromhex(line["digests"]), dtype="<u8")
        computations = notebooks.setdefault(notebook, {"computations": {}})["computations"]
        sums = computations.setdefault(line["computation"], dict.fromkeys(SUMS, 0))
        if line.get("read"):
            sums["read_back"] += len(digests)
            if line["entry"] in computed_entries:
                continue  # read back after this run computed it: no copy of it computed again
            place = EARLIER  # the entries of earlier runs, however often read: one place
        else:
            sums["computed"] += len(digests)
            for name in ("calls", "seconds", "copy_seconds", "flops"):
                sums[name] += line[name]
        sources.append((digests, place, line["time"], notebook, line["computation"]))
    for record in notebooks.values():
        record.update({name: sum(c[name] for c in record["computations"].values()) for name in SUMS})
    for path in sorted(Path(folder).glob(f"*{PLANNED}")):
        record = notebooks.setdefault(path.name.removesuffix(PLANNED), dict.fromkeys(SUMS, 0) | {"computations": {}})
        record["planned"] = json.loads(path.read_text())
    duplicated = duplicates_of(sources)
    return {
        "copy": COPY,
        "notebooks": notebooks,
        "computed": sum(r["computed"] for r in notebooks.values()),
        "read_back": sum(r["read_back"] for r in notebooks.values()),
        "flops": sum(r["flops"] for r in notebooks.values()),
        "duplicates": sum(d["copies"] for d in duplicated),
        "duplicated": duplicated,
    }


def duplicates_of(sources: list[tuple]) -> list[dict]:
    """The copies held by more than one place: (digests, place, time, notebook, computation) per ledger line ->
    [{"first": where the copy was first computed, "again": where again, "copies": how many}], most first."""
    import pandas as pd

    if not sources:
        return []
    frame = pd.DataFrame(
        {
            "digest": np.concatenate([s[0] for s in sources]),
            **{
                name: np.repeat([s[i] for s in sources], [len(s[0]) for s in sources])
                for i, name in enumerate(("place", "time", "notebook", "computation"), 1)
            },
        }
    )
    frame = frame.sort_values("time", kind="stable").drop_duplicates(["digest", "place"])
    frame["where"] = frame["notebook"] + ": " + frame["computation"]
    frame["nth"] = frame.groupby("digest").cumcount()
    first = frame[frame["nth"] == 0].set_index("digest")["where"]
    again = frame[frame["nth"] > 0]
    pairs = pd.DataFrame({"first": first.loc[again["digest"]].to_numpy(), "again": again["where"].to_numpy()})
    counts = pairs.value_counts().reset_index(name="copies")
    return [{"first": r.first, "again": r.again, "copies": int(r.copies)} for r in counts.itertuples()]


def summary_lines(ledger: dict, seconds_per_notebook: dict) -> list[str]:
    """One line per notebook: copies computed and read back (and planned), wall and CPU seconds, CPU seconds per
    computed copy; then the duplicates."""
    lines = []
    for notebook, record in sorted(ledger["notebooks"].items()):
        per_copy = f"{1e3 * record['copy_seconds'] / record['computed']:.2f} ms per copy" if record["computed"] else ""
        wall = seconds_per_notebook.get(notebook)
        planned = f" (planned {record['planned']:,})" if record.get("planned") else ""
        lines.append(
            f"    {notebook:<16}{record['computed']:>10,} computed {record['read_back']:>10,} read back{planned} "
            f"{'' if wall is None else f'{wall:>7.0f} s wall '}{record['seconds']:>7.0f} s CPU  {per_copy}"
        )
    lines.append(f"    duplicate copies: {ledger['duplicates']:,}")
    lines += [f"      {d['copies']:,} in {d['again']} (first in {d['first']})" for d in ledger["duplicated"]]
    return lines
