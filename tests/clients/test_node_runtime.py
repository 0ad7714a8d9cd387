"""How the daemon finds the Node client and lays it out for sandboxes (no Node needed)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from toolbridge._sandbox.runtime.node import (
    NodeClientMissingError,
    build_node_path,
    find_node_client,
    node_environment,
)

CHECKOUT_CLIENT = Path(__file__).resolve().parents[2] / "clients" / "node"


def _fake_client(root: Path, *, dependencies: bool = True) -> Path:
    """A minimal client directory: the package, and stand-ins for its dependencies."""
    client = root / "client"
    (client / "lib").mkdir(parents=True)
    manifest = {"name": "inngest_tools", "files": ["index.js", "register.js", "lib/"]}
    (client / "package.json").write_text(json.dumps(manifest))
    (client / "index.js").write_text("module.exports = {};\n")
    (client / "register.js").write_text("// preload\n")
    (client / "lib" / "client.js").write_text("// client\n")
    (client / "test").mkdir()
    (client / "test" / "a.test.js").write_text("// not published\n")
    if dependencies:
        for name in ("@grpc/grpc-js", "@grpc/proto-loader", "typescript"):
            (client / "node_modules" / name).mkdir(parents=True)
            (client / "node_modules" / name / "package.json").write_text("{}")
        (client / "node_modules" / ".package-lock.json").write_text('{"v": 1}')
    return client


def test_the_checkout_client_is_found_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLBRIDGE_NODE_CLIENT", raising=False)
    assert find_node_client() == CHECKOUT_CLIENT


def test_a_configured_client_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    client = _fake_client(tmp_path)
    monkeypatch.setenv("TOOLBRIDGE_NODE_CLIENT", str(client))
    assert find_node_client() == client


def test_a_directory_that_is_not_the_client_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "package.json").write_text('{"name": "something-else"}')
    monkeypatch.setenv("TOOLBRIDGE_NODE_CLIENT", str(tmp_path))
    with pytest.raises(NodeClientMissingError, match="is not the inngest_tools Node package"):
        find_node_client()


def test_a_client_without_its_dependencies_says_to_run_npm_ci(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    client = _fake_client(tmp_path, dependencies=False)
    monkeypatch.setenv("TOOLBRIDGE_NODE_CLIENT", str(client))
    with pytest.raises(NodeClientMissingError, match=r"run `npm ci` in .*client"):
        find_node_client()


def test_the_node_path_holds_the_published_files_and_is_reused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    client = _fake_client(tmp_path)
    monkeypatch.setenv("TOOLBRIDGE_NODE_CLIENT", str(client))
    cache = tmp_path / "cache"
    node_path, problem = build_node_path(cache)
    assert problem is None
    package = node_path / "inngest_tools"
    assert (package / "lib" / "client.js").read_text() == "// client\n"
    assert (package / "node_modules" / "typescript" / "package.json").is_file()
    assert not (package / "test").exists()
    assert build_node_path(cache) == (node_path, None)
    # A changed client file, or a new install of its dependencies, makes a new directory.
    (client / "lib" / "client.js").write_text("// client, changed\n")
    changed, _ = build_node_path(cache)
    assert changed != node_path
    assert (changed / "inngest_tools" / "lib" / "client.js").read_text() == "// client, changed\n"
    (client / "node_modules" / ".package-lock.json").write_text('{"v": 2}')
    assert build_node_path(cache)[0] not in (node_path, changed)


def test_a_missing_client_gets_a_stand_in_that_says_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TOOLBRIDGE_NODE_CLIENT", str(tmp_path / "nowhere"))
    node_path, problem = build_node_path(tmp_path / "cache")
    assert problem is not None
    assert "TOOLBRIDGE_NODE_CLIENT" in problem
    stand_in = (node_path / "inngest_tools" / "index.js").read_text()
    assert json.dumps(f"inngest_tools is not available in this sandbox: {problem}") in stand_in


def test_the_environment_points_require_and_import_at_the_client(tmp_path: Path) -> None:
    (tmp_path / "inngest_tools").mkdir()
    assert node_environment(tmp_path) == {"NODE_PATH": str(tmp_path)}
    (tmp_path / "inngest_tools" / "register.js").write_text("")
    odd = tmp_path / 'with space, "quote" and \\ backslash'
    shutil.copytree(tmp_path / "inngest_tools", odd / "inngest_tools")
    env = node_environment(odd)
    assert env["NODE_PATH"] == str(odd)
    preload = str(odd / "inngest_tools" / "register.js")
    quoted = preload.replace("\\", "\\\\").replace('"', '\\"')
    assert env["NODE_OPTIONS"] == f'--require "{quoted}"'


def test_node_accepts_the_environment_for_an_awkward_path(tmp_path: Path) -> None:
    node_path = tmp_path / 'run time, "quoted" \\ slashed'
    node_path.mkdir()
    (node_path / "inngest_tools").symlink_to(CHECKOUT_CLIENT)
    code = 'import { tools } from "inngest_tools"; console.log(typeof tools.getCustomer);'
    done = subprocess.run(
        ["node", "--input-type=module", "-e", code],
        env={"PATH": os.environ["PATH"], **node_environment(node_path)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "function\n"), done.stderr


def test_the_checkout_client_is_laid_out_with_a_typescript_code_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("TOOLBRIDGE_NODE_CLIENT", raising=False)
    node_path, problem = build_node_path(tmp_path / "cache")
    assert problem is None
    package = node_path / "inngest_tools"
    assert (package / "runner.js").is_file()
    assert (package / "register.js").is_file()
    assert (package / ".cache" / "typescript.v8").stat().st_size > 0
    assert not (CHECKOUT_CLIENT / ".cache").exists()
