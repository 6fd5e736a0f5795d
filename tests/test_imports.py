"""The import graph of helpers/: no cycle between its modules, and no lower layer importing a higher one.

Every import statement counts, at the top of a module or inside a function (a deferred import still ties the two
modules together). `from a import b` names module a.b when that is a module, else module a; importing a.b.c is
counted as importing a.b.c only, not the packages above it.
"""

import ast

from helpers.storage import paths

# Lower layers first: a module may import its own layer and those before it. The toy stands above measures (it
# trains and evaluates with the engine, the stimuli and the measures) and below studies (06 runs its depth probe).
LAYERS = (
    ("helpers.storage",),
    ("helpers.engine",),
    ("helpers.stimuli",),
    ("helpers.sizes",),
    ("helpers.measures",),
    ("helpers.toy",),
    ("helpers.figures",),
    ("helpers.studies",),
    ("helpers.runner",),
    ("helpers.run", "helpers.launch", "helpers.protocol"),
)


def _modules() -> dict:
    """Module name -> its file, for every module of helpers/ (a package by its __init__.py)."""
    found = {}
    for path in sorted(paths.HELPERS.rglob("*.py")):
        parts = list(path.relative_to(paths.ROOT).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of helpers/ it imports (itself left out)."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from . import x, from ..y import z
                    base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            imported.update(target for target in targets if target in modules)
        graph[name] = imported - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a path back to its first module) through each strongly connected group of modules."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(node):  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = set()
            while node not in group:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_cycle_in(graph, group) for group in groups]


def _cycle_in(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A path from the group's first module back to it, within the group (breadth first: a shortest one)."""
    start = min(group)
    came_from, todo = {start: None}, [start]
    while todo:
        node = todo.pop(0)
        for other in sorted(graph[node] & group):
            if other == start:
                path = [node]
                while came_from[path[-1]] is not None:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if other not in came_from:
                came_from[other] = node
                todo.append(other)
    raise AssertionError(f"no cycle through {start} in {sorted(group)}")


def _layer(module: str) -> int | None:
    for level, tops in enumerate(LAYERS):
        if any(module == top or module.startswith(top + ".") for top in tops):
            return level
    return None


def upward_imports(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Module -> the modules of a higher layer it imports."""
    found = {}
    for module, imported in graph.items():
        level = _layer(module)
        higher = {other for other in imported if level is not None and (_layer(other) or 0) > level}
        if higher:
            found[module] = higher
    return found


def test_cycles_are_found():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e2"}, "e2": {"e"}}
    assert sorted(cycles(graph)) == [["a", "b", "c", "a"], ["e", "e2", "e"]]


def test_no_import_cycle_between_the_modules_of_helpers():
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in found)


def test_no_lower_layer_imports_a_higher_one():
    """storage, engine, stimuli, sizes, measures, toy, figures, studies, runner, then the commands: a module
    imports its own layer and those below it only."""
    found = upward_imports(import_graph())
    assert not found, (
        f"modules importing a higher layer: { {module: sorted(higher) for module, higher in found.items()} }"
    )
