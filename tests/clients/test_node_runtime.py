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
DEPENDENCIES = ("typescript",)  # what the runner needs; the client speaks gRPC over its own HTTP/2
DEV_DEPENDENCIES = ("@grpc/grpc-js",)  # its tests' fake daemon, installed by `npm ci` beside


def _fake_client(root: Path, *, dependencies: bool = True) -> Path:
    """A minimal client directory: the package, and stand-ins for its dependencies and
    devDependencies (which `npm ci` installs in a checkout, and which no sandbox needs)."""
    client = root / "client"
    (client / "lib").mkdir(parents=True)
    manifest = {
        "name": "inngest_tools",
        "files": ["index.js", "register.js", "lib/"],
        "dependencies": dict.fromkeys(DEPENDENCIES, "*"),
        "devDependencies": dict.fromkeys(DEV_DEPENDENCIES, "*"),
    }
    (client / "package.json").write_text(json.dumps(manifest))
    (client / "index.js").write_text("module.exports = {};\n")
    (client / "register.js").write_text("// preload\n")
    (client / "lib" / "client.js").write_text("// client\n")
    (client / "test").mkdir()
    (client / "test" / "a.test.js").write_text("// not published\n")
    if dependencies:
        for name in DEPENDENCIES + DEV_DEPENDENCIES:
            _fake_package(client / "node_modules", name)
    return client


def _fake_package(modules: Path, name: str, **dependencies: str) -> Path:
    package = modules / name
    package.mkdir(parents=True)
    manifest = {"name": name, "version": "1.0.0", "dependencies": dependencies}
    (package / "package.json").write_text(json.dumps(manifest))
    (package / "index.js").write_text(f"// {name}\n")
    return package


def test_the_checkout_client_is_found_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLBRIDGE_NODE_CLIENT", raising=False)
    assert find_node_client().directory == CHECKOUT_CLIENT


def test_a_configured_client_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    client = _fake_client(tmp_path)
    monkeypatch.setenv("TOOLBRIDGE_NODE_CLIENT", str(client))
    assert find_node_client().directory == client


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
    with pytest.raises(NodeClientMissingError, match=r"misses dependencies .* \(typescript\): run `npm ci`"):
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
    assert not (package / "node_modules" / "@grpc").exists()  # a devDependency stays out
    assert not (package / "test").exists()
    assert build_node_path(cache) == (node_path, None)
    # A changed client file, or a new install of its dependencies, makes a new directory.
    (client / "lib" / "client.js").write_text("// client, changed\n")
    changed, _ = build_node_path(cache)
    assert changed != node_path
    assert (changed / "inngest_tools" / "lib" / "client.js").read_text() == "// client, changed\n"
    # The file was written in place: the directory built before still holds what it was
    # built from (its files are copies, not links to the checkout's), for a daemon using it.
    assert (package / "lib" / "client.js").read_text() == "// client\n"
    manifest = client / "node_modules" / "typescript" / "package.json"
    manifest.write_text(manifest.read_text().replace("1.0.0", "1.0.1"))
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


def test_the_checkout_client_needs_protobuf_and_takes_typescript_where_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # @grpc/grpc-js and protoc-gen-es are devDependencies (the tests' fake daemon, `make
    # proto`): `npm ci` installs them in the checkout, and neither the sandboxes' copy nor the
    # wheel takes them. typescript is an optional peer (only the TypeScript runner needs it):
    # installed in the checkout, so the sandboxes' copy and the wheel carry it.
    monkeypatch.delenv("TOOLBRIDGE_NODE_CLIENT", raising=False)
    manifest = json.loads((CHECKOUT_CLIENT / "package.json").read_text())
    assert sorted(manifest["dependencies"]) == ["@bufbuild/protobuf"]
    assert manifest["peerDependenciesMeta"] == {"typescript": {"optional": True}}
    assert {"@grpc/grpc-js", "@bufbuild/protoc-gen-es", "typescript"} <= manifest["devDependencies"].keys()
    places = sorted(str(place) for place in find_node_client().dependencies.values())
    assert places == ["@bufbuild/protobuf", "typescript"]


def test_the_checkout_client_is_laid_out_with_code_caches_node_accepts(
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
    # The client's own modules, down to those its first call loads, each compiled from the
    # cache by the node that runs commands (a cache V8 refused would say "rejected").
    loader = package / "lib" / "loader.js"
    code = (
        f"require('inngest_tools'); const loader = require({json.dumps(str(loader))});"
        f"loader.load({json.dumps(str(package / 'lib' / 'connection.js'))});"
        "process.stdout.write(JSON.stringify(loader.cacheOutcomes()));"
    )
    done = subprocess.run(
        ["node", "-e", code],
        env={**os.environ, **node_environment(node_path)},
        capture_output=True,
        check=True,
    )
    outcomes = json.loads(done.stdout)
    runtime = "node_modules/@bufbuild/protobuf/dist/cjs"
    assert {
        "lib/client.js",
        "lib/connection.js",
        "lib/transport.js",
        "lib/proto.js",
        "proto/toolbridge/v1/toolbridge_pb.js",
        f"{runtime}/to-binary.js",
    } <= outcomes.keys()
    assert set(outcomes.values()) == {"cached"}, outcomes


def _hoisted_project(root: Path) -> Path:
    """A project after `npm install inngest_tools`: dependencies next to the client, one of
    them with a nested copy of a package another version of which is hoisted."""
    modules = root / "project" / "node_modules"
    client = modules / "inngest_tools"
    client.mkdir(parents=True)
    manifest = {
        "name": "inngest_tools",
        "files": ["index.js"],
        "dependencies": {"@scope/a": "*", "b": "*"},
    }
    (client / "package.json").write_text(json.dumps(manifest))
    (client / "index.js").write_text("// client\n")
    _fake_package(modules, "@scope/a", long="*")
    _fake_package(modules, "long")
    _fake_package(modules, "b", long="*")
    nested = _fake_package(modules / "b" / "node_modules", "long")
    (nested / "index.js").write_text("// long, the version b needs\n")
    _fake_package(modules, "left-pad")  # the project's own, not the client's
    return client


def test_a_client_installed_by_npm_with_hoisted_dependencies_is_laid_out_whole(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    client = _hoisted_project(tmp_path)
    monkeypatch.setenv("TOOLBRIDGE_NODE_CLIENT", str(client))
    found = find_node_client()
    assert sorted(str(place) for place in found.dependencies.values()) == [
        "@scope/a",
        "b",
        "b/node_modules/long",
        "long",
    ]
    node_path, problem = build_node_path(tmp_path / "cache")
    assert problem is None
    modules = node_path / "inngest_tools" / "node_modules"
    assert (modules / "@scope" / "a" / "index.js").read_text() == "// @scope/a\n"
    assert (modules / "long" / "index.js").read_text() == "// long\n"
    assert (
        modules / "b" / "node_modules" / "long" / "index.js"
    ).read_text() == "// long, the version b needs\n"
    assert not (modules / "left-pad").exists()


def test_a_hoisted_client_missing_a_dependency_says_which(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    client = _hoisted_project(tmp_path)
    shutil.rmtree(client.parent / "long")
    monkeypatch.setenv("TOOLBRIDGE_NODE_CLIENT", str(client))
    with pytest.raises(NodeClientMissingError, match=r"long \(of @scope/a\)"):
        find_node_client()


def test_two_versions_that_would_share_a_place_are_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    client = _hoisted_project(tmp_path)
    # A `long` of the client's own, while the hoisted `c` it needs resolves the hoisted `long`:
    # both would be node_modules/long in the sandbox's copy.
    _fake_package(client / "node_modules", "long")
    (client / "package.json").write_text(
        json.dumps({"name": "inngest_tools", "dependencies": {"long": "*", "c": "*"}})
    )
    _fake_package(client.parent, "c", long="*")
    (client.parent / "c" / "node_modules").mkdir()  # c resolves long from the hoisted level
    monkeypatch.setenv("TOOLBRIDGE_NODE_CLIENT", str(client))
    with pytest.raises(NodeClientMissingError, match="would both be long"):
        find_node_client()


def test_the_wheel_s_client_comes_before_the_checkout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("TOOLBRIDGE_NODE_CLIENT", raising=False)
    packaged = _fake_client(tmp_path)
    monkeypatch.setattr("toolbridge._sandbox.runtime.node.PACKAGED_CLIENT", packaged)
    assert find_node_client().directory == packaged
    monkeypatch.setattr("toolbridge._sandbox.runtime.node.PACKAGED_CLIENT", tmp_path / "absent")
    assert find_node_client().directory == CHECKOUT_CLIENT
