"""Execute the numbered notebooks in order with papermill.

    python -m helpers.run                      # every notebook, default parameters -> paper_figures/
    python -m helpers.run 01 02 -p model /path/to/model -p device cuda
    python -m helpers.run --smoke              # small sizes, outputs under build/smoke/

Each `notebooks/NN_name.py` (jupytext percent source) is converted to `.ipynb`, executed with kernel
`python3` in `notebooks/`, and its executed copy written under `build/notebooks/` (or
`build/smoke/notebooks/`). The first failure stops the run and names the notebook and the cell.
"""

import argparse
import ast
import sys
import time
from pathlib import Path

import jupytext
import papermill
from papermill.exceptions import PapermillExecutionError

from helpers import paths


def notebook_sources() -> list[Path]:
    """The numbered notebook sources, in order."""
    return sorted(p for p in paths.NOTEBOOKS.glob("[0-9][0-9]_*.py"))


def select(names: list[str]) -> list[Path]:
    """Notebooks whose file stem starts with one of `names` ('01', '01_discovery'); all when empty."""
    sources = notebook_sources()
    if not names:
        return sources
    chosen = []
    for name in names:
        hits = [p for p in sources if p.stem.startswith(name)]
        if not hits:
            raise SystemExit(f"no notebook matches {name!r}; available: {', '.join(p.stem for p in sources)}")
        chosen += [p for p in hits if p not in chosen]
    return sorted(chosen)


def parse_value(text: str):
    """A -p value as papermill would take it: a Python literal where it is one, else the string."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def to_ipynb(source: Path, target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    jupytext.write(jupytext.read(source), target)
    return target


def run(sources: list[Path], overrides: dict, build_dir: Path, defaults: dict | None = None) -> None:
    """Execute `sources` in order. `overrides` (the user's -p) must each be declared by some selected
    notebook; they and `defaults` go to the notebooks that declare them."""
    inputs = {src: to_ipynb(src, build_dir / "source" / f"{src.stem}.ipynb") for src in sources}
    declared = {src: papermill.inspect_notebook(str(nb)) for src, nb in inputs.items()}
    unused = [name for name in overrides if not any(name in params for params in declared.values())]
    if unused:
        known = sorted({name for params in declared.values() for name in params})
        raise SystemExit(f"parameter(s) {unused} are taken by none of the selected notebooks; known: {known}")
    given = {**(defaults or {}), **overrides}
    (build_dir / "notebooks").mkdir(parents=True, exist_ok=True)
    for i, (src, nb) in enumerate(inputs.items(), 1):
        params = {k: v for k, v in given.items() if k in declared[src]}
        output = build_dir / "notebooks" / f"{src.stem}.ipynb"
        print(f"[{i}/{len(inputs)}] {src.stem} {params}", flush=True)
        start = time.time()
        try:
            papermill.execute_notebook(
                str(nb),
                str(output),
                parameters=params,
                kernel_name="python3",
                cwd=str(paths.NOTEBOOKS),
                progress_bar=False,
            )
        except PapermillExecutionError as err:
            raise SystemExit(
                f"FAILED {src.stem}: cell {err.cell_index} (execution count {err.exec_count}): "
                f"{err.ename}: {err.evalue}\nexecuted copy: {output}"
            ) from None
        print(f"      done in {time.time() - start:.0f} s -> {output}", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", help="prefixes of notebooks to run (default: all)")
    parser.add_argument(
        "-p",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="parameter override, as papermill's -p",
    )
    parser.add_argument("--smoke", action="store_true", help="small sizes; outputs under build/smoke/")
    args = parser.parse_args(argv)
    root = paths.BUILD / "smoke" if args.smoke else paths.BUILD
    defaults = {"out_dir": str(paths.PAPER_FIGURES), "cache_dir": str(paths.CACHE)}
    if args.smoke:
        defaults = {"smoke": True, "out_dir": str(root / "paper_figures"), "cache_dir": str(root / "cache")}
    overrides = {name: parse_value(value) for name, value in args.p}
    run(select(args.notebooks), overrides, root, defaults)


if __name__ == "__main__":
    sys.exit(main())
