"""The house as docs/architecture.md draws it, measured from the code (issue 38's "done when").

Rooms are the top-level folders (``crdscope.<room>``).  The import graph counts every import:
at module level, inside functions and under ``if TYPE_CHECKING:`` (a type-only import is still
a reader who must know the other room).  What is checked:

* the longest chain of rooms is at most 8 (cli > tui > session > findings > costmodel >
  probes|lab|loader > connection|toolchain > base), with no circle between rooms;
* probes, lab and loader do not import each other (they stand side by side);
* no room holds more than 20% of the product's lines;
* widgets and the session read typed values: at most 5 ``getattr(x, "name")`` reads in tui/,
  session/ and findings/, and explicit ``Any`` in tui/ and session/ at most half the 131 the issue
  counted;
* (issue 45) members are read by name nowhere: at most 5 reads by a literal name (``getattr``,
  ``hasattr``, ``setattr``, ``operator.attrgetter``) in the whole product outside connection/,
  whose reads of third-party objects are each allowed with a reason; no product function over 60
  lines.

``tests/unit/test_import_cycles.py`` checks that no two modules import each other.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator, Mapping
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
ROOMS = ("base", "cli", "connection", "toolchain", "probes", "loader", "lab", "session", "findings",
         "costmodel", "themes", "tui")
LONGEST_CHAIN = 8
SIDE_BY_SIDE = ("probes", "lab", "loader")
LARGEST_SHARE = 0.20
GETATTR_READS = 5
#: Reads by a literal name in the whole product outside connection/ (issue 45: 26 when filed, 15 in probes/).
BY_NAME_READS = 5
BY_NAME = ("getattr", "hasattr", "setattr", "attrgetter")
#: connection/ reads third-party objects whose members vary by version or platform: (file, name) -> why.
THIRD_PARTY_READS = {
    ("connection/cluster.py", "reason"): "ssl.SSLError carries the OpenSSL reason only when OpenSSL gave one",
    ("connection/heap.py", "malloc_trim"): "ctypes' libc has malloc_trim on glibc only (musl, macOS have none)",
    ("connection/kubeconfig.py", "problem_mark"): "PyYAML's YAMLError subclasses: only MarkedYAMLError has a mark",
    ("connection/kubeconfig.py", "problem"): "PyYAML's YAMLError subclasses: only MarkedYAMLError has a problem",
    ("connection/kubeconfig.py", "cert_file"): "the kubernetes package's Configuration sets it only for a client certificate",
    ("connection/kubeconfig.py", "key_file"): "the kubernetes package's Configuration sets it only for a client certificate",
    ("connection/kubeconfig.py", "tls_server_name"): "the kubernetes package's Configuration has it from client 21 on",
    ("connection/kubeconfig.py", "value"): "the kubernetes package's kubeconfig nodes (ConfigNode) wrap their value",
}
#: No product function is longer than this (issue 45), from ``def`` to its last line.
LONGEST_FUNCTION = 60
#: Half the explicit ``Any`` annotations in tui/ and session/ when issue 38 was filed (131).
ANY_ANNOTATIONS = 65


def room_graph() -> dict[str, set[str]]:
    """Room -> the other rooms it imports (every import, type-only and in functions included)."""
    roots = [f"crdscope.{room}" for room in ROOMS if (ROOT / room / "__init__.py").exists()]
    graph = grimp.build_graph(*roots, exclude_type_checking_imports=False)
    rooms: dict[str, set[str]] = {room: set() for room in ROOMS}
    for module in graph.modules:
        importer = module.split(".")[1]
        for imported in graph.find_modules_directly_imported_by(module):
            room = imported.split(".")[1]
            if room != importer:
                rooms[importer].add(room)
    return rooms


def longest_chain(graph: Mapping[str, set[str]]) -> list[str]:
    """The longest path of rooms along imports; a circle raises ValueError naming it."""

    @functools.cache
    def from_room(room: str, seen: frozenset[str]) -> tuple[str, ...]:
        best: tuple[str, ...] = (room,)
        for below in sorted(graph.get(room, ())):
            if below in seen or below == room:
                raise ValueError(f"rooms import each other: {room} -> {below}")
            chain = (room, *from_room(below, seen | {room}))
            if len(chain) > len(best):
                best = chain
        return best

    return max((list(from_room(room, frozenset())) for room in graph), key=len, default=[])


def product_files() -> Iterator[tuple[str, Path]]:
    for room in ROOMS:
        for path in sorted((ROOT / room).rglob("*.py")):
            yield room, path


def lines_of(path: Path) -> int:
    return sum(1 for line in path.read_text().splitlines() if line.strip())


def getattr_reads(tree: ast.AST) -> list[int]:
    """Lines of ``getattr(x, "literal", ...)``: reading an attribute by a name known when writing it."""
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
            and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)]


def by_name_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of every member read by a name written in the code: ``getattr(x, "n")``,
    ``hasattr(x, "n")``, ``setattr(x, "n", v)``, ``operator.attrgetter("n")`` (called by name or as
    ``module.function``); a name made by an f-string (``f"{probe}_idle"``) counts too."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        called = node.func.id if isinstance(node.func, ast.Name) else (
            node.func.attr if isinstance(node.func, ast.Attribute) else "")
        if called not in BY_NAME:
            continue
        names = node.args if called == "attrgetter" else node.args[1:2]
        found += [(node.lineno, arg.value if isinstance(arg, ast.Constant) else ast.unparse(arg)) for arg in names
                  if isinstance(arg, ast.JoinedStr) or (isinstance(arg, ast.Constant) and isinstance(arg.value, str))]
    return found


def long_functions(tree: ast.AST) -> list[tuple[str, int]]:
    """(name, lines) of every function longer than :data:`LONGEST_FUNCTION` lines."""
    return [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None
            and node.end_lineno - node.lineno + 1 > LONGEST_FUNCTION]


def any_uses(tree: ast.AST) -> int:
    """Explicit ``Any`` in annotations and casts (``Any``, ``typing.Any``; the import itself not)."""
    return sum(1 for node in ast.walk(tree)
               if (isinstance(node, ast.Name) and node.id == "Any")
               or (isinstance(node, ast.Attribute) and node.attr == "Any"))


def test_the_longest_chain_of_rooms():
    chain = longest_chain(room_graph())
    assert len(chain) <= LONGEST_CHAIN, " > ".join(chain)
    assert chain[0] == "cli" and chain[-1] == "base", chain


def test_probes_lab_and_loader_stand_side_by_side():
    graph = room_graph()
    crossing = [f"{room} -> {other}" for room in SIDE_BY_SIDE for other in SIDE_BY_SIDE if other in graph[room]]
    assert not crossing, crossing


def test_no_room_holds_more_than_a_fifth_of_the_product():
    lines: dict[str, int] = dict.fromkeys(ROOMS, 0)
    for room, path in product_files():
        lines[room] += lines_of(path)
    total = sum(lines.values())
    shares = {room: count / total for room, count in lines.items()}
    assert total > 10_000, "the product was not read"
    assert max(shares.values()) <= LARGEST_SHARE, {room: f"{share:.1%}" for room, share in shares.items()}


def test_widgets_and_the_session_read_typed_values():
    reads: list[str] = []
    anys = 0
    for room, path in product_files():
        if room not in ("tui", "session", "findings"):
            continue
        tree = ast.parse(path.read_text(), str(path))
        reads += [f"{path.relative_to(ROOT)}:{line}" for line in getattr_reads(tree)]
        if room in ("tui", "session"):
            anys += any_uses(tree)
    assert len(reads) <= GETATTR_READS, reads
    assert anys <= ANY_ANNOTATIONS, f"{anys} explicit Any in tui/ and session/"


def test_members_are_read_by_name_only_where_a_third_party_object_varies():
    outside: list[str] = []
    connection: set[tuple[str, str]] = set()
    for room, path in product_files():
        relative = str(path.relative_to(ROOT))
        reads = by_name_reads(ast.parse(path.read_text(), relative))
        if room == "connection":
            connection |= {(relative, name) for _, name in reads}
        else:
            outside += [f"{relative}:{line} {name}" for line, name in reads]
    assert len(outside) <= BY_NAME_READS, outside
    assert not any(place.startswith("probes/") for place in outside), outside
    assert connection <= set(THIRD_PARTY_READS), connection - set(THIRD_PARTY_READS)
    assert set(THIRD_PARTY_READS) <= connection, f"allowed but no longer read: {set(THIRD_PARTY_READS) - connection}"


def test_no_product_function_is_over_60_lines():
    long: list[str] = []
    for _room, path in product_files():
        relative = str(path.relative_to(ROOT))
        long += [f"{relative} {name}: {lines} lines"
                 for name, lines in long_functions(ast.parse(path.read_text(), relative))]
    assert not long, long


def test_the_measures_see_what_they_measure():
    assert longest_chain({"a": {"b"}, "b": {"c"}, "c": set(), "d": {"c"}}) == ["a", "b", "c"]
    try:
        longest_chain({"a": {"b"}, "b": {"a"}})
    except ValueError as exc:
        assert "import each other" in str(exc)
    else:
        raise AssertionError("a circle of rooms was not found")
    tree = ast.parse('x = getattr(app, "store", None)\ny = getattr(app, name)\nz: typing.Any\nw: Any = 1\n')
    assert getattr_reads(tree) == [1]
    assert any_uses(tree) == 2
    tree = ast.parse('hasattr(p, "busy")\nsetattr(s, "crds_in_use", n)\noperator.attrgetter("a", "b")\n'
                     'attrgetter(name)\ngetattr(p, f"{n}_idle")\nsetattr(s, name, 1)\n')
    assert by_name_reads(tree) == [(1, "busy"), (2, "crds_in_use"), (3, "a"), (3, "b"), (5, "f'{n}_idle'")]
    body = "\n".join(f"    x{i} = {i}" for i in range(LONGEST_FUNCTION - 1))
    assert long_functions(ast.parse(f"def fits():\n{body}\n")) == []
    assert long_functions(ast.parse(f"async def too_long():\n{body}\n    return 1\n")) == [("too_long", 61)]


def folder_loops(graph: grimp.ImportGraph, rooms: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Loops between a room's folders, each named from a folder back to itself.

    Within a room, each sub-folder (``tui/screens``, ``tui/panels``) is one node, its modules'
    imports its own (the graph is squashed: it changes), and each module directly in the room
    (``tui/app.py``) is a node of its own.  A loop is a node that reaches itself through others;
    two modules of one folder importing each other are ``test_import_cycles``'s to find, not this.
    """
    loops: dict[frozenset[str], tuple[str, ...]] = {}
    for room in rooms:
        root = f"crdscope.{room}"
        nodes = sorted(graph.find_children(root)) if root in graph.modules else []
        for node in nodes:
            if not graph.is_module_squashed(node) and graph.find_children(node):
                graph.squash_module(node)
        for node in nodes:
            for imported in sorted(graph.find_modules_directly_imported_by(node)):
                if not imported.startswith(f"{root}.") or imported == node:
                    continue
                back = graph.find_shortest_chain(importer=imported, imported=node, as_packages=False)
                if back is not None:
                    loops.setdefault(frozenset((node, *back)), (node, *back))
    return list(loops.values())


def test_no_import_loop_between_a_rooms_folders():
    """No import loop between a room's folders (imports in functions counted): nothing that
    ``tui/screens`` imports, directly or not, imports ``tui/screens`` back (issue 45)."""
    roots = [f"crdscope.{room}" for room in ROOMS if (ROOT / room / "__init__.py").exists()]
    graph = grimp.build_graph(*roots, exclude_type_checking_imports=False)
    assert "crdscope.tui.screens.monitor" in graph.modules, "the product was not read"
    loops = folder_loops(graph, ROOMS)
    assert not loops, [" -> ".join(loop) for loop in loops]


def test_the_folder_loop_measure_sees_a_loop():
    def graph_of(*imports: tuple[str, str]) -> grimp.ImportGraph:
        graph = grimp.ImportGraph()
        for module in ("crdscope.r", "crdscope.r.screens", "crdscope.r.screens.fleet", "crdscope.r.screens.dialogs",
                       "crdscope.r.actions", "crdscope.r.app", "crdscope.r.panels", "crdscope.r.panels.a",
                       "crdscope.r.panels.b", "crdscope.s", "crdscope.s.x"):
            graph.add_module(module)
        for importer, imported in imports:
            graph.add_import(importer=f"crdscope.{importer}", imported=f"crdscope.{imported}")
        return graph

    # Two modules of one folder importing each other, a room importing one below: no loop of folders.
    quiet = (("r.panels.a", "r.panels.b"), ("r.panels.b", "r.panels.a"), ("r.app", "r.screens.fleet"),
             ("r.screens.fleet", "s.x"), ("r.screens.fleet", "r.actions"))
    assert folder_loops(graph_of(*quiet), ("r", "s")) == []
    # The actions a screen imports (inside a function: for grimp an import as any) import another
    # screen: screens -> actions -> screens.
    loop = graph_of(*quiet, ("r.actions", "r.screens.dialogs"))
    assert folder_loops(loop, ("r", "s")) == [("crdscope.r.actions", "crdscope.r.screens", "crdscope.r.actions")]
    # Through three folders, named from the first one (in name order) back to itself, once.
    longer = graph_of(("r.app", "r.screens.fleet"), ("r.screens.dialogs", "r.panels.a"), ("r.panels.b", "r.app"),
                      ("r.panels.a", "r.panels.b"))
    assert folder_loops(longer, ("r", "s")) == [("crdscope.r.app", "crdscope.r.screens", "crdscope.r.panels",
                                                  "crdscope.r.app")]
