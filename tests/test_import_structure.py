"""The package's modules import each other without a circle.

A circle (say `saving` importing `models`, which imports `saving`) makes
import order matter and lets one concern reach into another's state; the
layers are: `distribution` and `saving` below `layers` and `models`, and
`models` on top.
"""

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "keras_nlp"


def _module_name(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules():
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _imports(path, modules):
    """Modules of the package that `path` imports, anywhere in the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            # `from a.b import c` imports the module a.b.c when it exists.
            names = [
                f"{node.module}.{alias.name}"
                if f"{node.module}.{alias.name}" in modules
                else node.module
                for alias in node.names
            ]
        else:
            continue
        found.update(name for name in names if name in modules)
    return found


def import_graph():
    modules = _modules()
    return {name: _imports(path, modules) for name, path in modules.items()}


def circles(graph):
    """The strongly connected groups of more than one module (Tarjan)."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1 or node in graph[node]:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_circles_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]


def test_the_package_has_no_import_circle():
    assert circles(import_graph()) == []


def test_saving_and_distribution_do_not_import_models():
    graph = import_graph()
    for name, targets in graph.items():
        if name.startswith(("keras_nlp.saving", "keras_nlp.distribution")):
            upward = sorted(
                t for t in targets if t.startswith("keras_nlp.models")
            )
            assert upward == [], f"{name} imports {upward}"
