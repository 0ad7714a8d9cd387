"""The documentation site's structure: every public name documented, every page reachable.

The site itself is built by `make docs` (`mkdocs build --strict`, part of `make test`), which
fails on a broken link or anchor, a missing sample file or a reference entry naming nothing.
These tests check what a strict build cannot see: that no public name is left out of the
reference, that every page is in the nav, and that every runnable sample is shown somewhere.
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from mkdocs.config import load_config

ROOT = Path(__file__).resolve().parent.parent.parent
# The hooks are a script MkDocs loads by path (mkdocs.yml's `hooks:`), not a package.
sys.path.insert(0, str(ROOT / "scripts"))
import mkdocs_hooks  # noqa: E402

DOCS = ROOT / "docs"
SAMPLES = ROOT / "examples" / "docs"


def mkdocs_nav() -> list[Any]:
    nav: list[Any] = load_config(str(ROOT / "mkdocs.yml"))["nav"]
    return nav


def test_every_public_name_has_a_reference_entry() -> None:
    # A name no topic page lists is given an entry by the hook, on the reference's index page.
    documented = set(mkdocs_hooks.documented_names())
    unsorted = set(mkdocs_hooks.unsorted_names())
    for name in mkdocs_hooks.public_names():
        assert name in documented or name in unsorted, name
    index = (DOCS / "reference" / "index.md").read_text()
    assert "<!-- toolbridge:unsorted -->" in index, "the unsorted names would have no page"


def test_a_new_public_name_gets_an_entry_without_editing_the_docs(monkeypatch: pytest.MonkeyPatch) -> None:
    toolbridge = importlib.import_module("toolbridge")
    monkeypatch.setattr(toolbridge, "__all__", [*toolbridge.__all__, "brand_new_name"])
    assert "toolbridge.brand_new_name" in mkdocs_hooks.unsorted_names()
    page = mkdocs_hooks.on_page_markdown("<!-- toolbridge:unsorted -->", None, None, None)
    assert "::: toolbridge.brand_new_name" in page


def _resolve(path: str) -> Any:
    module_name, _, rest = path.partition(".")
    obj: Any = importlib.import_module(module_name)
    for part in rest.split("."):
        obj = getattr(obj, part) if hasattr(obj, part) else importlib.import_module(f"{obj.__name__}.{part}")
    return obj


def _reachable_from_public(obj: Any) -> bool:
    """Whether ``obj`` is a public name, or a member of one (``tool.step`` is ``_ToolFactory.step``)."""
    target = getattr(obj, "__func__", obj)
    for qualified in mkdocs_hooks.public_names():
        public = _resolve(qualified)
        if public is obj:
            return True
        for member in dir(public):
            if getattr(getattr(public, member, None), "__func__", None) is target:
                return True
    return False


def test_every_reference_entry_names_a_public_name_or_a_member_of_one() -> None:
    # mkdocstrings fails the build on a name that does not exist; this catches one that still
    # exists but left the public surface (a private module's class documented as public).
    stale = [name for name in mkdocs_hooks.documented_names() if not _reachable_from_public(_resolve(name))]
    assert stale == []


def test_every_public_name_has_a_docstring() -> None:
    for qualified in mkdocs_hooks.public_names():
        module_name, _, name = qualified.rpartition(".")
        obj = getattr(importlib.import_module(module_name), name)
        assert (obj.__doc__ or "").strip(), f"{qualified} has no docstring for its reference entry"


def test_every_page_is_in_the_nav() -> None:
    nav = mkdocs_nav()
    added = mkdocs_hooks.extend_guides(nav)
    listed = set(mkdocs_hooks.nav_pages(nav))
    pages = {path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md")}
    assert pages - listed == set(), "add these pages to the nav in mkdocs.yml"
    assert listed - pages == set(), "the nav lists pages that do not exist"
    assert all(page.startswith("guides/") for page in added)


def test_a_new_guide_is_added_to_the_nav(tmp_path: Path) -> None:
    (tmp_path / "guides").mkdir()
    (tmp_path / "guides" / "listed.md").write_text("# Listed\n")
    (tmp_path / "guides" / "new-topic.md").write_text("# New topic\n")
    nav: list[Any] = [{"Home": "index.md"}, {"Guides": [{"Listed": "guides/listed.md"}]}]
    assert mkdocs_hooks.extend_guides(nav, tmp_path) == ["guides/new-topic.md"]
    assert nav[1]["Guides"][-1] == "guides/new-topic.md"


def test_every_sample_is_shown_on_a_page() -> None:
    included = set()
    for page in DOCS.rglob("*.md"):
        included |= set(re.findall(r'--8<-- "(examples/docs/[^":]+)', page.read_text()))
    samples = {path.relative_to(ROOT).as_posix() for path in SAMPLES.rglob("*") if path.is_file()}
    # A sample's expected output (x.out) is checked by test_samples.py, not shown.
    samples = {sample for sample in samples if "__pycache__" not in sample and not sample.endswith(".out")}
    assert samples - included == set(), "samples no page shows"
    assert included - samples == set(), "pages include samples that do not exist"


def test_the_cli_reference_covers_every_command() -> None:
    from toolbridge._cli.main import build_parser

    page = mkdocs_hooks.cli_markdown()
    for action in build_parser()._actions:
        for name in getattr(action, "choices", None) or {}:
            assert f"## `toolbridge {name}`" in page, name


def test_the_contract_reference_covers_every_element() -> None:
    page = mkdocs_hooks.proto_markdown()
    for proto in mkdocs_hooks.PROTO_DIR.glob("*.proto"):
        text = proto.read_text()
        for kind, name in re.findall(r"^(service|message|enum) (\w+)", text, re.MULTILINE):
            assert f"### {kind} `{name}`" in page, name
        for rpc in re.findall(r"^\s*rpc (\w+)", text, re.MULTILINE):
            assert f"| `{rpc}` |" in page, rpc
        fields = re.findall(r"^\s*(?:repeated )?[\w.]+ (\w+) = (\d+);", text, re.MULTILINE)
        for field, number in fields:
            assert f"| `{field} = {number}` |" in page, field


def test_every_limit_and_error_type_is_in_the_one_table() -> None:
    import dataclasses

    from toolbridge import SandboxLimits, ToolbridgeError, ToolOptions

    page = (DOCS / "reference" / "limits-and-errors.md").read_text()
    missing: list[str] = []
    for options in (ToolOptions, SandboxLimits):
        missing += [
            f"{options.__name__}.{option.name}"
            for option in dataclasses.fields(options)
            if f"`{option.name}`" not in page
        ]
    toolbridge = importlib.import_module("toolbridge")
    for name in toolbridge.__all__:
        obj = getattr(toolbridge, name)
        if isinstance(obj, type) and issubclass(obj, ToolbridgeError) and f"| `{name}` |" not in page:
            missing.append(name)
    # Every error type the daemon reports to a sandbox by name (`type="..."`).
    source = "\n".join(path.read_text() for path in (ROOT / "daemon" / "toolbridge").rglob("*.py"))
    reported = sorted(set(re.findall(r'\btype="([A-Z]\w+)"', source)))
    missing += [f"the error type {name}" for name in reported if f"`{name}`" not in page]
    assert missing == [], "give each a row in docs/reference/limits-and-errors.md"


def test_no_snippet_line_was_mangled_by_a_formatter() -> None:
    # A Python formatter run over Markdown rewrites `--8<-- "x"` as `--8 < --"x"`: the sample
    # is then shown as that text instead of included. (ruff leaves docs/ alone: pyproject.toml.)
    mangled = [str(page.relative_to(ROOT)) for page in DOCS.rglob("*.md") if "--8 < --" in page.read_text()]
    assert mangled == [], 'write the include line as --8<-- "examples/docs/FILE.py"'


def test_the_readme_is_a_front_page_whose_example_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    # The example is the sample test_samples.py runs (and checks the output of), verbatim.
    example = (SAMPLES / "readme_example.py").read_text()
    assert f"```python\n{example}```" in readme
    assert "make demo" in readme
    assert "make test" in readme
    # Its links into the site point at pages that exist.
    for target in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / target).exists(), target


def test_the_contract_parser_reads_nesting_maps_optionals_and_oneofs() -> None:
    header, elements = mkdocs_hooks.parse_proto(
        "// The file.\n//\n// Second paragraph.\n"
        'syntax = "proto3";\n'
        "// Outer doc.\nmessage Outer {\n"
        "  // Inner doc.\n  message Inner {\n    // Counts.\n    map<string, int64> counts = 1;\n  }\n"
        "  // A name.\n  optional string name = 2;\n"
        "  oneof pick {\n    // The inner one.\n    Inner inner = 3;\n  }\n"
        "  reserved 4;\n}\n"
    )
    assert header == "The file.\n\nSecond paragraph."
    assert [(element.name, element.comment) for element in elements] == [
        ("Outer.Inner", "Inner doc."),
        ("Outer", "Outer doc."),
    ]
    assert elements[0].members == [("counts = 1", "map<string, int64>", "Counts.")]
    assert elements[1].members == [
        ("name = 2", "optional string", "A name."),
        ("inner = 3", "Inner", "One of `pick`: The inner one."),
    ]
