"""The report card (helpers/studies/protocol) for any model and head-set, as a command and as notebook 07 uses it.

    python -m helpers.protocol --model toy --heads data/headsets/co-ref-qsp.json            # default profile
    python -m helpers.protocol --model PATH --heads my_heads.json --profile paper --out DIR
    python -m helpers.protocol --model toy --heads scores.npy --k 11 -p n_items 20          # imported scores
    python -m helpers.protocol --model toy --method gaze                                    # a published method

The command runs notebooks/07_protocol.py through the same runner and cache as every notebook (helpers/run.py, one
run folder); the notebook writes report.md and report.html beside its executed copy. `--method` discovers the
method's top-k set (k: `--k`, else notebook 08's) on the model the card loads (helpers/runner/card_inputs.py); an
unknown method, or a region method on a family that maps no region, is refused in one line before any model loads.
`--out` and the head-set files are checked as the runner checks them, a malformed file before torch is imported.
"""

import argparse
from dataclasses import replace
from pathlib import Path

from helpers import sizes
from helpers.measures import names
from helpers.runner.cli import add_parameter_option, check_option, parameter_overrides
from helpers.stimuli.design import SETTINGS
from helpers.storage import paths, runs


def __getattr__(name: str):
    """Notebook 07's names (Protocol, build_card, write_report), imported on first use: the command's checks come
    before torch."""
    if name == "Protocol":
        from helpers.runner.card_inputs import NotebookProtocol

        return NotebookProtocol
    if name in ("build_card", "write_report"):
        from helpers.studies import protocol

        return getattr(protocol, name)
    raise AttributeError(f"module 'helpers.protocol' has no attribute {name!r}")


def main(argv=None) -> None:
    from helpers import run  # the runner (papermill) is not needed where the notebook imports this module

    profiles, schemes = " or ".join(sizes.PROFILE_NAMES), ", ".join(names.CONTROL_SCHEMES)
    methods = ", ".join(names.METHOD_NAMES)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="toy", help="toy, a local save_pretrained folder or a hub id")
    parser.add_argument("--heads", nargs="+", default=[], help="head-set files (json, npy, csv) or setting names")
    parser.add_argument("--method", help="discover a head-set with a published method first: " + methods)
    parser.add_argument("--profile", default="default", help="the notebooks' profile: " + profiles)
    parser.add_argument("--k", type=int, help="heads to take from an imported score file")
    parser.add_argument("--heads-from-other-model", action="store_true", help="card head-sets of another model")
    parser.add_argument("--out", help="the run folder (default: runs/<model>-<hash>/)")
    parser.add_argument("--controls", help="a control scheme for an NCS line beside the layer-matched one: " + schemes)
    add_parameter_option(parser, "a notebook parameter (device, dtype, beta, ...) or a size (n_items, n_random, ...)")
    args = parser.parse_args(argv)
    if args.out is not None:  # checked as the runner checks it, before anything starts
        check_option("--out", "out_dir", args.out)
    try:  # each refusal a ValueError naming what is allowed, given in one line before any model loads
        if args.method is not None:
            from helpers.measures.methods import check_method
            from helpers.runner.card_inputs import refuse_unservable

            refuse_unservable(check_method(args.method), args.model)
        if args.controls is not None:
            from helpers.measures import control_schemes

            control_schemes.check_scheme(args.controls)
    except ValueError as error:
        raise SystemExit(str(error)) from None
    if not args.heads and args.method is None:
        parser.error("give --heads, --method, or both")
    check_option("--profile", "profile", args.profile)
    heads = [h if h in SETTINGS else str(Path(h).expanduser().resolve()) for h in args.heads]
    given = parameter_overrides(args.p)
    size_overrides = {n: given.pop(n) for n in list(given) if n in sizes.CARD_SIZES["default"]}
    overrides = {"model": args.model, "heads": heads, "profile": args.profile, **given}
    optional = {"sizes": size_overrides or None, "import_k": args.k, "controls": args.controls}
    optional["heads_from_other_model"] = args.heads_from_other_model or None
    overrides.update({name: value for name, value in optional.items() if value is not None})
    out = Path(args.out).expanduser().resolve() if args.out else None
    folders = runs.in_folder(out) if out else runs.scratch(args.model, overrides)
    # setting names are read from the model's default data folder (where 01_discovery writes), unless given
    data = Path(overrides.pop("data_dir")) if "data_dir" in overrides else runs.folders_for(args.model, {}).data
    folders = replace(folders, data=data)
    print(f"run folder: {folders.out}", flush=True)
    if args.method is not None:
        overrides["method"] = args.method  # discovered in the card's kernel, on the model it loads for the card
    source, build = paths.NOTEBOOKS / "07_protocol.py", paths.BUILD / "runner" / folders.out.name
    timings = run.run([source], overrides, build, folders)
    run.write_run_json(folders, overrides, timings)
    print(f"report: {folders.notebooks / 'report.md'} and report.html ({timings['07_protocol']:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
