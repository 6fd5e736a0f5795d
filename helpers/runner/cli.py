"""What the commands (python -m helpers.run, helpers.protocol, helpers.launch) read from their command line alike:
notebook parameters as `-p NAME VALUE`, taken as papermill takes them, and options checked as the notebook
parameter they stand for."""

import argparse
import ast
from pathlib import Path

from helpers.runner.params import CHECKS, ParameterError
from helpers.storage import runs


def add_parameter_option(parser: argparse.ArgumentParser, help: str) -> None:
    """`-p NAME VALUE`, repeatable: args.p is the list of [name, value] pairs as given."""
    parser.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"), help=help)


def parameter_overrides(pairs) -> dict:
    """The `-p` pairs as notebook parameters: each value parsed (parse_value), folder parameters resolved."""
    return resolve_paths({name: parse_value(value) for name, value in pairs})


def parse_value(text: str):
    """A -p value as papermill would take it: a Python literal where it is one, else the string."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def resolve_paths(overrides: dict) -> dict:
    """Folder parameters given on the command line are relative to where the user ran from."""
    return {
        k: str(Path(v).expanduser().resolve()) if k in runs.DIR_PARAMETERS and isinstance(v, str) else v
        for k, v in overrides.items()
    }


def check_option(option: str, name: str, value) -> None:
    """Refuse `option`'s value in one line unless it passes the check of the notebook parameter `name`."""
    try:
        CHECKS[name](value)
    except ParameterError as error:
        raise SystemExit(f"{option} {value}: {error}") from None
