"""One meaning per name: no public top-level name of helpers/ is defined in two modules.

The same check from a shell: `python -m pytest -q tests/test_names.py`.
"""

import ast
from collections import defaultdict

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
