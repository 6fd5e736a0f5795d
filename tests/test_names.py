"""One meaning per name: no public top-level name of helpers/ is defined in two modules, and a row group (a name of
helpers.engine.row_groups.ROW_GROUPS) is passed as `row_group`, never as `rows` (table rows, or the engine's query-row
masks).

The same check from a shell: `python -m pytest -q tests/test_names.py`.
"""

import ast
import importlib
import inspect
from collections import defaultdict

import pytest

from helpers.runner.params import RENAMED, declared_parameters
from helpers.storage import paths

# module attributes that mark a kind of module rather than name a thing (helpers.storage.code_hash)
MARKERS = {"DECIDES_RESULTS"}


def _top_level_names(tree: ast.Module) -> list[str]:
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [target.id for target in node.targets if isinstance(target, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return [name for name in names if not name.startswith("_") and name != "main" and name not in MARKERS]


def test_no_public_name_is_defined_twice_in_helpers():
    where = defaultdict(set)
    for path in sorted(paths.HELPERS.rglob("*.py")):
        for name in _top_level_names(ast.parse(path.read_text())):
            where[name].add(str(path.relative_to(paths.ROOT)))
    twice = {name: sorted(files) for name, files in where.items() if len(files) > 1}
    assert not twice, f"names defined in more than one module: {twice}"


def test_the_engine_imports_none_of_the_papers_modules():
    """helpers/engine/ runs any model on any item: it may use storage (files, paths) but not the paper's
    stimuli, measures, studies, runner or figures."""
    paper = ("helpers.stimuli", "helpers.measures", "helpers.studies", "helpers.runner", "helpers.figures")
    found = []
    for path in sorted((paths.HELPERS / "engine").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            found += [f"{path.name}: {name}" for name in names if name.startswith(paper)]
    assert not found, f"engine modules importing the paper's modules: {found}"


STRING_ANNOTATIONS = {"str", "str | None", "None | str", "Optional[str]"}
# the public callables that take a row group, as (module, qualified name)
TAKE_ROW_GROUP = [
    ("helpers.engine.mcq", "letter_probs_under"),
    ("helpers.engine.image_attention", "image_mass"),
    ("helpers.measures.necessity", "mask_items"),
    ("helpers.measures.necessity", "necessity_run"),
    ("helpers.measures.steering", "steer_items"),
    ("helpers.measures.steering", "steering_run"),
    ("helpers.measures.head_mass", "item_masses"),
    ("helpers.measures.head_mass", "mass_run"),
    ("helpers.studies.evaluation", "Evaluation.__init__"),
    ("helpers.studies.evaluation", "Evaluation.steer"),
    ("helpers.studies.evaluation", "Evaluation.hide_cells"),
    ("helpers.studies.evaluation", "Evaluation.mask"),
    ("helpers.studies.experiment", "Experiment.mask_controls"),
]


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef):
    """(name, annotation source or None, default node or None) of each parameter of `function`."""
    args = function.args
    named = [*args.posonlyargs, *args.args]
    defaults = [None] * (len(named) - len(args.defaults)) + list(args.defaults) + list(args.kw_defaults)
    for arg, default in zip([*named, *args.kwonlyargs], defaults):
        yield arg.arg, ast.unparse(arg.annotation) if arg.annotation else None, default


def test_no_parameter_named_rows_takes_a_row_group_name():
    """A parameter `rows` holds table rows or an engine query-row mask (annotated as one); one annotated `str`, or
    unannotated with a string default, would be a row group under the old name."""
    found = []
    for path in sorted(paths.HELPERS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for name, annotation, default in _parameters(node):
                string_default = isinstance(default, ast.Constant) and isinstance(default.value, str)
                if name == "rows" and (annotation in STRING_ANNOTATIONS or (annotation is None and string_default)):
                    found.append(f"{path.relative_to(paths.ROOT)}: {node.name}({name}: {annotation})")
    assert not found, f"parameters named rows that take a row group (name them row_group): {found}"


@pytest.mark.parametrize("module, name", TAKE_ROW_GROUP, ids=[name for _, name in TAKE_ROW_GROUP])
def test_a_row_group_is_row_group_and_the_old_keyword_is_refused(module, name):
    function = importlib.import_module(module)
    for part in name.split("."):
        function = getattr(function, part)
    parameters = inspect.signature(function).parameters
    assert "row_group" in parameters and "rows" not in parameters
    with pytest.raises(TypeError, match=r"rows= is now row_group="):
        function(None, rows="all")


def test_no_notebook_declares_a_parameter_under_its_old_name():
    declared = {path.stem: declared_parameters(path.stem) for path in sorted(paths.NOTEBOOKS.glob("[0-9]*.py"))}
    old = {notebook: sorted(set(names) & set(RENAMED)) for notebook, names in declared.items()}
    assert not any(old.values()), f"parameters under an old name (renamed: {RENAMED}): {old}"


# the engine's public callables and dataclasses that take a query-row selection ([B, T] bool or "all")
TAKE_QUERY_ROWS = [
    ("helpers.engine.attention", "Read"),
    ("helpers.engine.attention", "Intervention"),
    ("helpers.engine.head_sets", "run_head_sets"),
    ("helpers.engine.leakage", "leak"),
    ("helpers.engine.top_key", "attention_rows"),
    ("helpers.engine.top_key", "top_keys"),
]


@pytest.mark.parametrize("module, name", TAKE_QUERY_ROWS, ids=[name for _, name in TAKE_QUERY_ROWS])
def test_the_engine_names_its_query_row_selection_query_rows(module, name):
    parameters = inspect.signature(getattr(importlib.import_module(module), name)).parameters
    assert "query_rows" in parameters and "rows" not in parameters


def test_no_parameter_or_field_named_rows_in_helpers():
    """`rows` is left to table rows: no parameter or annotated field of helpers/ is named rows (a row group is
    row_group, the engine's selection query_rows, a count n_rows)."""
    found = []
    for path in sorted(paths.HELPERS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found += [
                    f"{path.relative_to(paths.ROOT)}: {node.name}"
                    for name, _, _ in _parameters(node)
                    if name == "rows"
                ]
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "rows":
                found.append(f"{path.relative_to(paths.ROOT)}: field rows")
    allowed = {  # table rows: a list of records or a frame
        "helpers/engine/support.py: support_matrix",
        "helpers/studies/findings.py: _unadjusted_calls_by_setting",
        "helpers/studies/controls/masking.py: masking_table",
    }
    assert set(found) <= allowed, f"rows that are not table rows: {sorted(set(found) - allowed)}"
