"""No import cycles among crdscope's modules (the layer contracts only see packages).

Every import counts: deferred imports inside functions and imports made only for type checkers
(under ``if TYPE_CHECKING:``) too.  A cycle hidden in a function or behind a type is still two
modules that cannot be understood one without the other.
"""

from __future__ import annotations

import grimp

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: The installed namespace's packages: the folders at the top of the repository.
PACKAGES = ("base", "cli", "connection", "toolchain", "probes", "loader", "lab", "session", "findings", "costmodel", "themes", "tui")


def _strongly_connected(graph: grimp.ImportGraph) -> list[list[str]]:
    """Tarjan's algorithm over the module graph: every group of modules that import each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0

    def visit(start: str) -> None:
        nonlocal counter
        # Iterative depth-first search: the module graph is deep enough to trouble recursion limits.
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return groups


def _graph() -> grimp.ImportGraph:
    # One root per package: `crdscope` itself is a namespace that grimp cannot walk as one.
    roots = [f"crdscope.{name}" for name in PACKAGES if (ROOT / name / "__init__.py").exists()]
    return grimp.build_graph(*roots, exclude_type_checking_imports=False)


def test_the_graph_sees_the_project():
    graph = _graph()
    assert "crdscope.probes.scheduler" in graph.modules
    assert graph.find_modules_directly_imported_by("crdscope.tui.app"), "imports were not read"


def test_no_module_imports_itself_through_others():
    cycles = _strongly_connected(_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(group) for group in cycles)


def test_the_cycle_finder_finds_a_cycle():
    graph = grimp.ImportGraph()
    for name in ("a", "a.one", "a.two", "a.three"):
        graph.add_module(name)
    graph.add_import(importer="a.one", imported="a.two")
    graph.add_import(importer="a.two", imported="a.one")
    graph.add_import(importer="a.two", imported="a.three")
    assert _strongly_connected(graph) == [["a.one", "a.two"]]
