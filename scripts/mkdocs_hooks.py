"""MkDocs hooks: the parts of the site generated from the code, so they cannot go stale.

- The CLI reference (``<!-- toolbridge:cli -->`` in a page) is rendered from the ``toolbridge``
  command's own argparse parser (``toolbridge._cli.main.build_parser``).
- The gRPC contract (``<!-- toolbridge:proto -->``) is rendered from
  ``proto/toolbridge/v1/*.proto``: every service, RPC, message, field and enum with its comment.
- The API reference: every name in ``toolbridge.__all__`` and ``toolbridge.testing.__all__``
  that no page under ``docs/reference/`` documents with a ``::: module.Name`` entry gets one on
  the page holding ``<!-- toolbridge:unsorted -->``, so a public name added by anyone is in the
  site at once (``tests/docs/test_site.py`` checks the whole mapping).
- The benchmark figures (``<!-- toolbridge:bench-results -->``): ``bench/results.md`` as the
  last ``make bench`` wrote it, its headings moved one level down under the page's own.
- The nav: a page added under ``docs/guides/`` and not yet listed in ``mkdocs.yml`` is appended
  to the Guides section, so a guide is never built unreachable.

Everything here runs offline and in well under a second.
"""

from __future__ import annotations

import argparse
import importlib
import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PROTO_DIR = ROOT / "proto" / "toolbridge" / "v1"
PUBLIC_MODULES = ("toolbridge", "toolbridge.testing")
GUIDES_SECTION = "Guides"

_ENTRY = re.compile(r"^::: ([\w.]+)\s*$", re.MULTILINE)


# -- the API reference ---------------------------------------------------------------------------


def public_names() -> list[str]:
    """Every public name, fully qualified: ``toolbridge.Bridge``, ``toolbridge.testing.ToolHarness``."""
    names: list[str] = []
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        names.extend(f"{module_name}.{name}" for name in module.__all__)
    return names


def documented_names(docs: Path = DOCS) -> dict[str, Path]:
    """The ``::: name`` entries written in the reference pages, each with its page."""
    found: dict[str, Path] = {}
    for page in sorted((docs / "reference").rglob("*.md")):
        for name in _ENTRY.findall(page.read_text()):
            found.setdefault(name, page)
    return found


def unsorted_names(docs: Path = DOCS) -> list[str]:
    """Public names no reference page lists yet: they go to the unsorted section."""
    documented = documented_names(docs)
    return [name for name in public_names() if name not in documented]


def _unsorted_markdown() -> str:
    names = unsorted_names()
    if not names:
        return "Every public name is documented on one of the pages above."
    entries = "\n\n".join(f"::: {name}" for name in names)
    return (
        "These public names are not on a topic page yet; they are listed here automatically "
        "until someone places them.\n\n" + entries
    )


# -- the CLI reference ---------------------------------------------------------------------------


def _subparsers(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser, str]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, sub, helps.get(name, "")


def _cli_section(prog: str, parser: argparse.ArgumentParser, summary: str, depth: int) -> list[str]:
    lines = [f"{'#' * depth} `{prog}`", ""]
    if summary:
        lines += [summary, ""]
    # The parser's own help, exactly as `toolbridge ... --help` prints it (a fixed width, so
    # the page does not depend on the terminal that built it).
    formatter_width = 100
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=formatter_width)
    lines += ["```text", parser.format_help().rstrip(), "```", ""]
    for name, sub, help_text in _subparsers(parser):
        lines += _cli_section(f"{prog} {name}", sub, help_text, min(depth + 1, 4))
    return lines


def cli_markdown() -> str:
    """The reference of every ``toolbridge`` command, from its argparse parser."""
    from toolbridge._cli.main import build_parser

    parser = build_parser()
    lines: list[str] = []
    commands = list(_subparsers(parser))
    lines += ["| command | what it does |", "| --- | --- |"]
    lines += [f"| [`toolbridge {name}`](#toolbridge-{name}) | {text} |" for name, _, text in commands]
    lines += [""]
    lines += _cli_section("toolbridge", parser, "", 2)
    return "\n".join(lines)


# -- the gRPC contract ---------------------------------------------------------------------------


@dataclass
class ProtoElement:
    """One service, message or enum of a .proto file, with its comment and members."""

    kind: str
    name: str
    comment: str
    members: list[tuple[str, str, str]] = field(default_factory=list)  # (name, type or number, comment)


def parse_proto(text: str) -> tuple[str, list[ProtoElement]]:
    """The file's leading comment and its elements, nested ones named ``Outer.Inner``.

    A small line parser for the style buf lint enforces here: one element or member per line,
    each after its own ``//`` comment.
    """
    header: list[str] = []
    elements: list[ProtoElement] = []
    comment: list[str] = []
    stack: list[ProtoElement | str] = []  # open elements, and "oneof NAME" blocks
    seen_code = False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("//"):
            comment.append(line[2:].removeprefix(" "))
            continue
        if not line:
            if not seen_code and comment:
                header, comment = comment, []
            continue
        if not seen_code and comment and not header:
            header, comment = comment, []  # the file's own comment, right above `syntax`
        seen_code = True
        text_of = " ".join(comment)
        comment = []
        current = next((item for item in reversed(stack) if isinstance(item, ProtoElement)), None)
        oneof = stack[-1] if stack and isinstance(stack[-1], str) else ""
        opening = re.match(r"(service|message|enum) (\w+) \{$", line)
        if opening:
            name = f"{current.name}.{opening.group(2)}" if current is not None else opening.group(2)
            stack.append(ProtoElement(opening.group(1), name, text_of))
            continue
        if line.startswith("oneof "):
            stack.append(f"oneof {line.split()[1]}")
            continue
        if line == "}":
            closed = stack.pop() if stack else None
            if isinstance(closed, ProtoElement):
                elements.append(closed)
            continue
        if current is None:
            continue
        rpc = re.match(r"rpc (\w+)\((stream )?([\w.]+)\) returns \((stream )?([\w.]+)\)", line)
        member = re.match(r"((?:repeated |optional )?(?:map<[\w., ]+>|[\w.]+)) (\w+) = (\d+)", line)
        value = re.match(r"(\w+) = (-?\d+)", line)
        if rpc:
            signature = f"{rpc.group(2) or ''}{rpc.group(3)} → {rpc.group(4) or ''}{rpc.group(5)}"
            current.members.append((rpc.group(1), signature, text_of))
        elif member:
            note = f"One of `{oneof.removeprefix('oneof ')}`: {text_of}" if oneof else text_of
            current.members.append((f"{member.group(2)} = {member.group(3)}", member.group(1), note))
        elif value and current.kind == "enum":
            current.members.append((value.group(1), value.group(2), text_of))
    return "\n".join(header), elements  # its `//` blank lines stay paragraph breaks


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def proto_markdown() -> str:
    """Every element of the contract, from ``proto/toolbridge/v1/*.proto``."""
    lines: list[str] = []
    for path in sorted(PROTO_DIR.glob("*.proto")):
        header, elements = parse_proto(path.read_text())
        lines += [f"## `{path.relative_to(ROOT)}`", "", header, ""]
        for element in elements:
            lines += [f"### {element.kind} `{element.name}`", "", element.comment, ""]
            columns = {
                "service": ("RPC", "request → response"),
                "message": ("field", "type"),
                "enum": ("value", "number"),
            }[element.kind]
            lines += [f"| {columns[0]} | {columns[1]} | meaning |", "| --- | --- | --- |"]
            lines += [f"| `{name}` | `{kind}` | {_cell(note)} |" for name, kind, note in element.members]
            lines += [""]
    return "\n".join(lines)


# -- the benchmark figures ---------------------------------------------------------------------


def bench_results_markdown() -> str:
    """``bench/results.md`` without its title, each heading one level deeper."""
    lines = (ROOT / "bench" / "results.md").read_text().splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    in_fence = False
    shifted: list[str] = []
    for line in lines:
        if line.startswith("```"):
            in_fence = not in_fence
        shifted.append("#" + line if line.startswith("#") and not in_fence else line)
    return "\n".join(shifted)


# -- the nav -------------------------------------------------------------------------------------


def nav_pages(nav: Any) -> Iterator[str]:
    """Every page path a nav (as written in mkdocs.yml) lists."""
    if isinstance(nav, str):
        if not nav.startswith(("http://", "https://")):
            yield nav
    elif isinstance(nav, list):
        for item in nav:
            yield from nav_pages(item)
    elif isinstance(nav, dict):
        for value in nav.values():
            yield from nav_pages(value)


def extend_guides(nav: list[Any], docs: Path = DOCS) -> list[str]:
    """Append the guides under ``docs/guides/`` that the nav does not list; return them."""
    listed = set(nav_pages(nav))
    added = [
        path.relative_to(docs).as_posix()
        for path in sorted((docs / "guides").glob("*.md"))
        if path.relative_to(docs).as_posix() not in listed
    ]
    for item in nav:
        if isinstance(item, dict) and GUIDES_SECTION in item:
            item[GUIDES_SECTION].extend(added)
            return added
    raise ValueError(f"mkdocs.yml's nav has no {GUIDES_SECTION!r} section")


# -- MkDocs events -------------------------------------------------------------------------------


def on_config(config: Any) -> Any:
    extend_guides(config["nav"])
    return config


_MARKERS = {
    "<!-- toolbridge:cli -->": cli_markdown,
    "<!-- toolbridge:proto -->": proto_markdown,
    "<!-- toolbridge:unsorted -->": _unsorted_markdown,
    "<!-- toolbridge:bench-results -->": bench_results_markdown,
}


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    for marker, render in _MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, textwrap.dedent(render()))
    return markdown


# The docstrings name each other with Sphinx roles (":class:`Bridge`"), which read well in
# `help()` and an editor; mkdocstrings renders Markdown and would show the role itself.
_ROLE = re.compile(r":(?:class|meth|func|attr|mod|data|exc|obj):(<code>)")


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    return _ROLE.sub(r"\1", html)
