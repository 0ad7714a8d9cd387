"""Imports run one way: a walk over the package's imports with ``ast`` fails on an upward edge,
on a forbidden sibling edge, on a runtime import cycle, and on the CLI reading a private
attribute of a ``Bridge``.

The layers are ARCHITECTURE.md's. Every import counts for direction, including those under
``if TYPE_CHECKING:`` and those inside functions (a lazy import still couples the modules);
only imports that run when a module is loaded (module level, not under ``TYPE_CHECKING``)
count for cycles. A new top-level module must be given a layer here before it can be used.

The checker itself is tested below on small packages written to a temp dir, so a check that
silently stopped finding edges would fail too.
"""

from __future__ import annotations

import ast
import graphlib
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "daemon" / "toolbridge"

# Top-level parts of `toolbridge` and their layer; each may import only what is below it.
LAYERS: dict[str, float] = {
    **dict.fromkeys(
        [
            "_errors",
            "_records",
            "_json",
            "_options",
            "_tokens",
            "_futures",
            "_affinity",
            "_secrets",
            "_durations",
        ],
        0,
    ),
    "_tls": 0,
    **dict.fromkeys(["_schema", "_journal", "_sandbox", "_telemetry"], 1),
    "_tools": 2,
    **dict.fromkeys(["_definitions", "_durable"], 3),
    "_calls": 4,
    "_door": 4.5,  # the sandbox's door for programs and egress: serves a command, starts nothing
    **dict.fromkeys(["_commands", "_server", "_ui"], 5),
    **dict.fromkeys(["_bridge", "_step", "testing"], 6),
    "": 6.5,  # toolbridge/__init__.py: the public surface, above everything it re-exports
    **dict.fromkeys(["_cli", "_mcp"], 7),  # programs on the public API
}
# Layers whose parts are leaves: they import the values (layer 0) and nothing beside them.
LEAF_LAYERS = frozenset({1})
# Edges between parts of one layer that are forbidden all the same.
FORBIDDEN = frozenset({("_definitions", "_durable"), ("_bridge", "testing")})
# Generated code, not walked (it imports protobuf only).
EXCLUDED = ("_server/_proto",)


@dataclass(frozen=True)
class Edge:
    importer: str  # dotted module names
    imported: str
    line: int
    runtime: bool  # runs when the importer is loaded (module level, not TYPE_CHECKING)
    type_only: bool = False  # under ``if TYPE_CHECKING:``: never runs


def _module_name(package: str, root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([package, *parts])


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


Found = tuple[ast.Import | ast.ImportFrom, bool, bool]


def _imports(tree: ast.Module) -> Iterator[Found]:
    """Every import statement, with whether it runs when the module is loaded and whether it
    is for the type checker only."""

    def walk(nodes: list[ast.stmt], runtime: bool, type_only: bool) -> Iterator[Found]:
        for node in nodes:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                yield node, runtime, type_only
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                yield from walk(node.body, False, True)
                yield from walk(node.orelse, runtime, type_only)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield from walk(node.body, False, type_only)
            else:
                for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                    children = getattr(node, field, None)
                    if isinstance(children, list):
                        stmts = [c for c in children if isinstance(c, ast.stmt)]
                        nested = [s for c in children if not isinstance(c, ast.stmt) for s in c.body]
                        yield from walk(stmts + nested, runtime, type_only)

    yield from walk(tree.body, True, False)


def collect_edges(package: str, root: Path) -> tuple[set[str], list[Edge]]:
    """The package's modules and every import between two of them."""
    sources = {
        _module_name(package, root, path): path
        for path in sorted(root.rglob("*.py"))
        if not any(part in path.relative_to(root).as_posix() for part in EXCLUDED)
    }
    modules = set(sources)
    edges: list[Edge] = []
    for name, path in sources.items():
        is_package = path.name == "__init__.py"
        base = name.split(".") if is_package else name.split(".")[:-1]
        for node, runtime, type_only in _imports(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    anchor = base[: len(base) - (node.level - 1)]
                    source = ".".join([*anchor, *([node.module] if node.module else [])])
                else:
                    source = node.module or ""
                for alias in node.names:
                    submodule = f"{source}.{alias.name}"
                    targets.append(submodule if submodule in modules else source)
            for target in targets:
                if target == package or target.startswith(package + "."):
                    # `import a.b.c` of a module we do not walk (generated): its nearest known parent.
                    while target not in modules and "." in target:
                        target = target.rsplit(".", 1)[0]
                    edges.append(Edge(name, target, node.lineno, runtime, type_only))
    return modules, edges


def _part(package: str, module: str) -> str:
    rest = module[len(package) + 1 :] if module != package else ""
    return rest.split(".", 1)[0]


def layer_violations(
    package: str,
    edges: list[Edge],
    *,
    layers: Mapping[str, float] = LAYERS,
    leaf_layers: frozenset[float] = LEAF_LAYERS,
    forbidden: frozenset[tuple[str, str]] = FORBIDDEN,
) -> list[str]:
    """One message per import that runs against the layers (or reaches an unknown part)."""
    problems: list[str] = []
    for edge in edges:
        a, b = _part(package, edge.importer), _part(package, edge.imported)
        where = f"{edge.importer}:{edge.line} imports {edge.imported}"
        for part in (a, b):
            if part not in layers:
                problems.append(f"{where}: {package}.{part} has no layer; add it to LAYERS in {__name__}")
        if a == b or a not in layers or b not in layers:
            continue
        if layers[a] < layers[b]:
            problems.append(f"{where}: upward edge (layer {layers[a]:g} → {layers[b]:g})")
        elif layers[a] == layers[b] and layers[a] in leaf_layers:
            problems.append(f"{where}: {a} is a leaf and may import only layer 0")
        elif (a, b) in forbidden:
            problems.append(f"{where}: {a} must never import {b}")
    return problems


def import_cycles(modules: set[str], edges: list[Edge]) -> list[str]:
    """Runtime import cycles, each as ``a → b → a``."""
    return _cycles(modules, [edge for edge in edges if edge.runtime])


def room_cycles(package: str, modules: set[str], edges: list[Edge]) -> list[str]:
    """Cycles among the modules of one subpackage (a room), each as ``a → b → a``.

    Every import between two modules of a room counts, a lazy one inside a function too (it
    still couples the two both ways); only imports for the type checker do not.
    """
    return _cycles(
        modules,
        [
            edge
            for edge in edges
            if not edge.type_only
            and _part(package, edge.importer) == _part(package, edge.imported) != ""
            and "." in edge.importer[len(package) + 1 :]  # a module in a room, not a top-level one
        ],
    )


def _cycles(modules: set[str], edges: list[Edge]) -> list[str]:
    graph: dict[str, set[str]] = {module: set() for module in modules}
    for edge in edges:
        if edge.imported != edge.importer:
            graph[edge.importer].add(edge.imported)
    cycles: list[str] = []
    while True:
        try:
            graphlib.TopologicalSorter(graph).prepare()
        except graphlib.CycleError as exc:
            cycle: list[str] = exc.args[1]
            cycles.append(" → ".join(reversed(cycle)))
            graph[cycle[1]].discard(cycle[0])  # cut one edge to find the next cycle, if any
        else:
            return cycles


def private_bridge_reads(root: Path) -> list[str]:
    """``something._name`` in a module under ``root`` where ``something`` is not a module alias.

    The CLI is a program on the public API: it may read no private attribute of a Bridge (or
    of anything else it did not import as a module).
    """
    problems: list[str] = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        modules = {
            alias.asname or alias.name
            for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for alias in node.names
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id in modules | {"self", "cls"})
            ):
                problems.append(f"{path.name}:{node.lineno} reads {ast.unparse(node)}")
    return problems


# --- the package ---------------------------------------------------------------------------------


def test_imports_run_down_the_layers() -> None:
    _, edges = collect_edges("toolbridge", PACKAGE_DIR)
    assert len(edges) > 100  # the walk found the package's imports at all
    assert layer_violations("toolbridge", edges) == []


def test_no_runtime_import_cycles() -> None:
    modules, edges = collect_edges("toolbridge", PACKAGE_DIR)
    assert import_cycles(modules, edges) == []


def test_no_import_cycle_inside_a_room() -> None:
    modules, edges = collect_edges("toolbridge", PACKAGE_DIR)
    assert room_cycles("toolbridge", modules, edges) == []


def unawaited_writes(root: Path) -> list[str]:
    """``<...journal>.write(...)`` as a statement of its own: a write nobody waits for.

    ``write`` is awaited until committed; a write the caller goes on from is ``write_soon``,
    so that each call site says which it means.
    """
    problems: list[str] = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Expr)
                and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Attribute)
                and node.value.func.attr == "write"
                and ast.unparse(node.value.func.value).endswith("journal")
            ):
                problems.append(f"{path.relative_to(root)}:{node.lineno} {ast.unparse(node.value)}")
    return problems


def test_every_journal_write_is_awaited_or_says_soon() -> None:
    assert unawaited_writes(PACKAGE_DIR) == []


def test_an_unawaited_journal_write_is_found(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(
        "async def f(run, rec):\n    run.journal.write(rec)\n    await run.journal.write(rec)\n"
        "    run.journal.write_soon(rec)\n    done = run.journal.write(rec)\n"
    )
    assert unawaited_writes(tmp_path) == ["a.py:2 run.journal.write(rec)"]


MODULE_LINES = 400
"""The most lines a hand-written module of the daemon or the Python client may have."""
CLIENT_DIR = PACKAGE_DIR.parents[1] / "clients" / "python" / "inngest_tools"


def long_modules(roots: Sequence[Path], limit: int = MODULE_LINES) -> dict[str, int]:
    """Hand-written modules (not generated ``_proto``) longer than ``limit`` lines, by path."""
    found = {}
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if "_proto" in path.relative_to(root).parts:
                continue
            lines = len(path.read_text().splitlines())
            if lines > limit:
                found[f"{root.name}/{path.relative_to(root).as_posix()}"] = lines
    return found


def test_no_hand_written_module_is_over_400_lines() -> None:
    assert long_modules([PACKAGE_DIR, CLIENT_DIR]) == {}


def test_a_long_module_is_found_and_generated_code_is_not(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "_proto").mkdir(parents=True)
    (tmp_path / "pkg" / "long.py").write_text("x = 1\n" * 401)
    (tmp_path / "pkg" / "short.py").write_text("x = 1\n" * 400)
    (tmp_path / "pkg" / "_proto" / "generated_pb2.py").write_text("x = 1\n" * 900)
    assert long_modules([tmp_path / "pkg"]) == {"pkg/long.py": 401}


def test_the_cli_reads_no_private_attribute() -> None:
    assert private_bridge_reads(PACKAGE_DIR / "_cli") == []


# --- the checker, on synthetic packages ----------------------------------------------------------


def _package(root: Path, files: Mapping[str, str]) -> Path:
    pkg = root / "pkg"
    for name, text in {"__init__.py": "", **files}.items():
        path = pkg / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if path.parent != pkg and not (path.parent / "__init__.py").exists():
            (path.parent / "__init__.py").write_text("")
    return pkg


def _violations(root: Path, files: Mapping[str, str]) -> list[str]:
    _, edges = collect_edges("pkg", _package(root, files))
    return layer_violations("pkg", edges)


def test_an_upward_edge_is_found(tmp_path: Path) -> None:
    problems = _violations(tmp_path, {"_errors.py": "from pkg._calls.call import x\n", "_calls/call.py": ""})
    assert problems == ["pkg._errors:1 imports pkg._calls.call: upward edge (layer 0 → 4)"]


def test_an_upward_edge_under_type_checking_or_in_a_function_counts(tmp_path: Path) -> None:
    files = {
        "_journal/sqlite.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from pkg._durable import runs\n"
            "def f():\n"
            "    from .. import _bridge\n"
        ),
        "_durable/runs.py": "",
        "_bridge.py": "",
    }
    problems = _violations(tmp_path, files)
    assert [p.split(":")[1].split(" ")[0] for p in problems] == ["3", "5"]
    assert all("upward edge" in p for p in problems)


def test_relative_imports_are_resolved(tmp_path: Path) -> None:
    problems = _violations(tmp_path, {"_tools/tool.py": "from .._calls import call\n", "_calls/call.py": ""})
    assert problems == ["pkg._tools.tool:1 imports pkg._calls.call: upward edge (layer 2 → 4)"]


def test_downward_and_internal_edges_pass(tmp_path: Path) -> None:
    files = {
        "_calls/call.py": "from pkg._errors import E\nfrom . import scope\nimport pkg._tools.tool\n",
        "_calls/scope.py": "",
        "_tools/tool.py": "",
        "_errors.py": "",
    }
    assert _violations(tmp_path, files) == []


def test_a_leaf_importing_a_sibling_is_found(tmp_path: Path) -> None:
    files = {"_sandbox/run.py": "from pkg._journal import sqlite\n", "_journal/sqlite.py": ""}
    assert _violations(tmp_path, files) == [
        "pkg._sandbox.run:1 imports pkg._journal.sqlite: _sandbox is a leaf and may import only layer 0"
    ]


def test_a_forbidden_sibling_edge_is_found(tmp_path: Path) -> None:
    files = {"_definitions/build.py": "import pkg._durable.steps\n", "_durable/steps.py": ""}
    assert _violations(tmp_path, files) == [
        "pkg._definitions.build:1 imports pkg._durable.steps: _definitions must never import _durable"
    ]


def test_a_module_without_a_layer_is_named(tmp_path: Path) -> None:
    problems = _violations(tmp_path, {"_misc.py": "", "_bridge.py": "from pkg import _misc\n"})
    assert problems == [
        f"pkg._bridge:1 imports pkg._misc: pkg._misc has no layer; add it to LAYERS in {__name__}"
    ]


def test_a_runtime_cycle_is_found_and_a_type_checking_one_is_not(tmp_path: Path) -> None:
    pkg = _package(
        tmp_path,
        {
            "_calls/a.py": "from pkg._calls import b\n",
            "_calls/b.py": "from pkg._calls.c import x\n",
            "_calls/c.py": "import pkg._calls.a\n",
            "_tools/d.py": "import typing\nif typing.TYPE_CHECKING:\n    from pkg._tools import e\n",
            "_tools/e.py": "from pkg._tools import d\n",
            "_tools/f.py": "def g():\n    from pkg._tools import h\n",
            "_tools/h.py": "from pkg._tools import f\n",
        },
    )
    modules, edges = collect_edges("pkg", pkg)
    cycles = import_cycles(modules, edges)
    assert len(cycles) == 1
    assert set(cycles[0].split(" → ")) == {"pkg._calls.a", "pkg._calls.b", "pkg._calls.c"}


def test_a_cycle_inside_a_room_is_found_even_lazy_but_not_a_type_only_one(tmp_path: Path) -> None:
    pkg = _package(
        tmp_path,
        {
            "_journal/base.py": "def open():\n    from pkg._journal import postgres\n",
            "_journal/postgres.py": "from pkg._journal.base import Durability\n",
            "_tools/tool.py": "import typing\nif typing.TYPE_CHECKING:\n    from pkg._tools import context\n",
            "_tools/context.py": "from pkg._tools import tool\n",
        },
    )
    modules, edges = collect_edges("pkg", pkg)
    assert import_cycles(modules, edges) == []  # lazy: no cycle when the modules load
    cycles = room_cycles("pkg", modules, edges)
    assert len(cycles) == 1
    assert set(cycles[0].split(" → ")) == {"pkg._journal.base", "pkg._journal.postgres"}


def test_a_private_attribute_read_is_found(tmp_path: Path) -> None:
    cli = tmp_path / "_cli"
    cli.mkdir()
    (cli / "serve.py").write_text(
        "import os\nfrom pkg import _json\n"
        "def serve(bridge):\n"
        "    os._exit\n    _json._private\n    bridge.address\n    bridge.__class__\n"
        "    return bridge._journal\n"
    )
    assert private_bridge_reads(cli) == ["serve.py:8 reads bridge._journal"]


@pytest.mark.parametrize("part", sorted(set(LAYERS) - {""}))
def test_every_layered_part_exists(part: str) -> None:
    """A stale entry in LAYERS would let a renamed module escape its layer."""
    assert (PACKAGE_DIR / f"{part}.py").exists() or (PACKAGE_DIR / part).is_dir()


# --- the generated code's one importer per side (ruff's banned-api rule, TID251) -----------------

RUFF = Path(sys.executable).parent / "ruff"


def _banned(filename: str, source: str) -> list[str]:
    """TID251 findings ruff reports for ``source`` as if it were ``filename`` in this repo."""
    done = subprocess.run(
        [
            str(RUFF),
            "check",
            "--select",
            "TID251",
            "--output-format",
            "concise",
            "--stdin-filename",
            filename,
            "-",
        ],
        input=source,
        capture_output=True,
        text=True,
        cwd=PACKAGE_DIR.parents[1],
        check=False,
    )
    return [line for line in done.stdout.splitlines() if "TID251" in line]


@pytest.mark.parametrize(
    "source",
    [
        "from toolbridge._server._proto import toolbridge_pb2\n",
        "from .._server._proto.toolbridge_pb2 import CallToolRequest\n",
        "import toolbridge._server._proto.toolbridge_pb2_grpc\n",
        "import inngest_tools._proto.toolbridge_pb2\n",
    ],
)
def test_generated_code_is_banned_outside_its_importer(source: str) -> None:
    assert len(_banned("daemon/toolbridge/_calls/call.py", source)) == 1


def test_each_side_has_its_one_importer() -> None:
    server = "from toolbridge._server._proto import toolbridge_pb2\n"
    client = "from inngest_tools._proto import toolbridge_pb2\n"
    assert _banned("daemon/toolbridge/_server/service.py", server) == []
    assert _banned("clients/python/inngest_tools/_transport.py", client) == []
    assert len(_banned("clients/python/inngest_tools/_client.py", client)) == 1
    assert len(_banned("clients/python/inngest_tools/__init__.py", client)) == 1
