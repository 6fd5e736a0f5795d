"""No module of helpers/ imports another module's private names (``from helpers.x import _y``): what modules share is
public. Only imports from helpers/ count (a third-party package's private name is not ours to make public); the
tests may import private names, so only helpers/ is read."""

import ast

from helpers.storage import paths


def private_imports(module: str, source: str, is_package: bool = False) -> list[str]:
    """``"from <module> import <name>"`` for each private name of another helpers module that ``source`` (module
    ``module``, a package's __init__ when ``is_package``) imports, at the top or inside a function."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom):
            continue
        target = node.module or ""
        if node.level:  # relative: from . import x, from ..y import z
            target = ".".join(package[: len(package) - node.level + 1] + ([target] if target else []))
        if target == module or not (target == "helpers" or target.startswith("helpers.")):
            continue
        names = [alias.name for alias in node.names]
        found += [f"from {target} import {name}" for name in names if name.startswith("_") and not name.endswith("__")]
    return found


def test_private_imports_are_found():
    source = "from helpers.a import _x, y\nfrom .b import _z, __version__\nfrom transformers import _t\n"
    source += "def f():\n    from ..c import _w\n"
    assert private_imports("helpers.p.m", source) == [
        "from helpers.a import _x",
        "from helpers.p.b import _z",
        "from helpers.c import _w",
    ]


def test_no_module_of_helpers_imports_another_ones_private_names():
    found = []
    for path in sorted(paths.HELPERS.rglob("*.py")):
        parts = list(path.relative_to(paths.HELPERS.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        module = ".".join(parts[:-1] if is_package else parts)
        found += [f"{module}: {line}" for line in private_imports(module, path.read_text(), is_package)]
    assert not found, "private names imported across modules:\n" + "\n".join(found)
