"""How long a bad input takes to be refused: wall time from starting the command to its message.

Run from the repo root: ``python -m bench.bench_checks [--repeats 3]``. Writes build/bench/checks.json and
prints a table. Each command runs in a fresh process, alternated with the others, --repeats times (medians).
The reference is importing torch and transformers, which every refusal paid before the checks stopped
importing them; the ratios say how much of that a refusal costs now.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

from helpers.storage import paths

COMMANDS = {
    "refusal: a size (n_items 1)": ["-m", "helpers.run", "03", "-p", "n_items", "1", "--out", "{out}"],
    "refusal: a folder without weights": ["-m", "helpers.run", "01", "-p", "model", "{empty}", "--out", "{out}"],
    "refusal from the config: k 129 > 128 heads": ["-m", "helpers.run", "01", "-p", "k", "129", "--out", "{out}"],
    "card refusal: --out an existing file": ["-m", "helpers.protocol", "--heads", "co-ref-qsp", "--out", "{a_file}"],
    "card refusal: --out under /proc": ["-m", "helpers.protocol", "--heads", "co-ref-qsp", "--out", "/proc/nope"],
    "card refusal: a malformed head-set file": ["-m", "helpers.protocol", "--heads", "{broken}", "--out", "{out}"],
    "reference: import torch, transformers": ["-c", "import torch, transformers"],
}


def _seconds(args: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, *args], cwd=paths.ROOT, capture_output=True, text=True)
    return time.perf_counter() - start, (proc.stdout + proc.stderr).strip().splitlines()[-1:]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    scratch = paths.BUILD / "bench" / "checks"
    (scratch / "empty").mkdir(parents=True, exist_ok=True)
    (scratch / "empty" / "config.json").write_text((paths.TOY_MODEL / "config.json").read_text())
    (scratch / "a_file").write_text("x")
    (scratch / "broken.json").write_text("{not json")
    folders = {"out": "run", "empty": "empty", "a_file": "a_file", "broken": "broken.json"}
    fill = {name: str(scratch / file) for name, file in folders.items()}
    commands = {name: [a.format(**fill) for a in argv_] for name, argv_ in COMMANDS.items()}
    times, messages = {name: [] for name in commands}, {}
    for _ in range(args.repeats):
        for name, command in commands.items():
            seconds, messages[name] = _seconds(command)
            times[name].append(seconds)
    reference = statistics.median(times["reference: import torch, transformers"])
    rows = [
        {
            "command": name,
            "median_s": statistics.median(t),
            "ratio_to_reference": statistics.median(t) / reference,
            "message": messages[name],
        }  # fmt: skip
        for name, t in times.items()
    ]
    paths.BENCH_OUT.mkdir(parents=True, exist_ok=True)
    (paths.BENCH_OUT / "checks.json").write_text(json.dumps({"repeats": args.repeats, "rows": rows}, indent=2))
    for row in rows:
        print(f"{row['command']:<48} {row['median_s']:6.2f} s  {row['ratio_to_reference']:5.2f}x the reference")


if __name__ == "__main__":
    main()
