"""Installed as users install it: wheels and an npm tarball, no checkout, no index.

Builds both distributions (sdist, then the wheel from the sdist) and the npm tarball, installs
the wheels into a fresh venv with ``pip install --no-index --find-links DIST toolbridge`` and
the tarball into an empty Node project, all in a temp dir outside the checkout, and runs every
kind of command from there with PYTHONPATH, NODE_PATH and TOOLBRIDGE_NODE_CLIENT unset.
Third-party wheels come from a cache of the development venv's exact versions (see
``artifacts``), kept in pytest's cache; ``npm install`` takes the tarball's dependencies from
npm's cache when it has them, else from the registry, as it would for a user.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import tarfile
import zipfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from tests.install import artifacts
from tests.install.artifacts import CHECKOUT

HOST = Path(__file__).with_name("host.py")
WAIT = 120.0

pytestmark = pytest.mark.timeout(300)  # building and installing come first, in the fixture


@dataclass(frozen=True)
class Installed:
    """What the fixture built and installed, all below ``root`` (outside the checkout)."""

    root: Path
    dist: Path
    venv: Path
    project: Path
    version: str

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def env(self, **extra: str) -> dict[str, str]:
        """A user's environment: nothing that points into the checkout."""
        return {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": os.environ.get("HOME", str(self.root)),
            "TOOLBRIDGE_RUNTIME_DIR": str(self.root / "runtime"),
            **extra,
        }


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Installed:
    root = tmp_path_factory.mktemp("installed")
    assert not root.is_relative_to(CHECKOUT)
    dist = root / "dist"
    dist.mkdir()
    artifacts.build(dist)
    wheels = artifacts.wheel_cache(request.config.cache.mkdir("install-wheels"))
    artifacts.install_venv(root / "venv", dist, wheels)
    version = artifacts.release_version()
    artifacts.install_npm_project(root / "project", dist / f"inngest_tools-{version}.tgz")
    return Installed(root=root, dist=dist, venv=root / "venv", project=root / "project", version=version)


def test_the_artifacts_carry_one_version_and_the_node_client(installed: Installed) -> None:
    names = sorted(p.name for p in installed.dist.iterdir())
    v = installed.version
    assert names == [
        f"inngest_tools-{v}-py3-none-any.whl",
        f"inngest_tools-{v}.tar.gz",
        f"inngest_tools-{v}.tgz",
        f"toolbridge-{v}-py3-none-any.whl",
        f"toolbridge-{v}.tar.gz",
    ]
    with zipfile.ZipFile(installed.dist / f"toolbridge-{v}-py3-none-any.whl") as wheel:
        files = set(wheel.namelist())
        metadata = wheel.read(f"toolbridge-{v}.dist-info/METADATA").decode()
    client = "toolbridge/_sandbox/runtime/node_client/"
    needed = ["package.json", "index.js", "index.mjs", "register.js", "runner.js", "LICENSE"]
    needed += [
        "node_modules/typescript/lib/typescript.js",
        "node_modules/@bufbuild/protobuf/dist/cjs/to-binary.js",
    ]
    assert not [name for name in needed if client + name not in files]
    # @bufbuild/protobuf (the messages) is its one runtime dependency and typescript (for the
    # runner) its optional peer, installed in the checkout it is built from; @grpc/grpc-js and
    # protoc-gen-es, devDependencies (the tests' fake daemon, `make proto`), stay out.
    places = [
        f.removeprefix(client + "node_modules/").split("/")
        for f in files
        if f.startswith(client + "node_modules/")
    ]
    dependencies = {"/".join(parts[:2]) if parts[0].startswith("@") else parts[0] for parts in places}
    assert dependencies == {"@bufbuild/protobuf", "typescript"}
    assert not [f for f in files if "/test/" in f or (f.endswith(".d.ts") and "node_modules" in f)]
    dependency = "Requires-Dist: inngest-tools"
    requirement = next(
        Requirement(line.split(": ", 1)[1]) for line in metadata.splitlines() if line.startswith(dependency)
    )
    assert requirement.specifier.contains(v)
    with tarfile.open(installed.dist / f"inngest_tools-{v}.tgz") as tarball:
        published = sorted(m.name.removeprefix("package/") for m in tarball.getmembers() if m.isfile())
    assert {"README.md", "LICENSE", "index.d.ts", "index.d.mts", "package.json"} <= set(published)
    assert not [p for p in published if p.startswith(("test/", "node_modules/"))]
    manifest = installed.project / "node_modules" / "inngest_tools" / "package.json"
    assert "private" not in json.loads(manifest.read_text())
    assert not (installed.project / "node_modules" / "@grpc").exists()  # npm installs no devDependency


def test_the_venv_holds_real_installs_not_links_to_the_checkout(installed: Installed) -> None:
    site = next((installed.venv / "lib").glob("python3.*/site-packages"))
    for path in [*site.glob("*.pth"), *site.glob("*.dist-info/direct_url.json")]:
        assert str(CHECKOUT) not in path.read_text(), path
    assert (site / "toolbridge" / "_sandbox" / "runtime" / "node_client" / "package.json").is_file()


def _inside(path: str, folder: Path) -> bool:
    return Path(path.removeprefix("file://")).resolve().is_relative_to(folder.resolve())


def _host(installed: Installed, sandbox: str, name: str, **env: str) -> dict[str, Any]:
    work = installed.root / f"work-{name}"
    work.mkdir()
    work.chmod(0o755)  # a bwrap sandbox's folder must be readable by its unprivileged uid
    shutil.copy(HOST, work / "host.py")
    out = artifacts.run(
        [
            installed.python,
            work / "host.py",
            "--sandbox",
            sandbox,
            "--work",
            work,
            "--journal",
            work / "journal.db",
        ],
        cwd=work,
        env=installed.env(**env),
    )
    report: dict[str, Any] = json.loads(out)
    assert not [entry for entry in report["sys_path"] if entry and _inside(entry, CHECKOUT)]
    assert _inside(report["toolbridge"], installed.venv)
    assert _inside(report["inngest_tools"], installed.venv)
    runtime = installed.root / "runtime"
    for kind in ("python", "require", "import"):
        result = report[kind]
        assert result["exit_code"] == 0, result["stderr"]
        answer, module = result["stdout"].split()
        assert answer == "2"
        assert _inside(module, runtime), module
    assert (report["python_snippet"], report["typescript_snippet"]) == (2, 2)
    return report


@pytest.mark.parametrize("sandbox", ["process", pytest.param("bwrap", marks=pytest.mark.bwrap)])
def test_every_kind_of_command_runs_from_the_wheels(installed: Installed, sandbox: str) -> None:
    required = os.environ.get("TOOLBRIDGE_REQUIRE_BWRAP") == "1"
    if sandbox == "bwrap" and shutil.which("bwrap") is None and not required:
        pytest.skip("bubblewrap is not installed (apt-get install -y bubblewrap)")
    report = _host(installed, sandbox, sandbox)
    assert _inside(report["node_client"], installed.venv)


def test_the_daemon_takes_a_client_installed_by_npm(installed: Installed) -> None:
    client = installed.project / "node_modules" / "inngest_tools"
    assert not (client / "node_modules").exists()  # its dependencies are hoisted next to it
    report = _host(installed, "process", "npm-client", TOOLBRIDGE_NODE_CLIENT=str(client))
    assert Path(report["node_client"]) == client.resolve()


SIDECAR_APP = """\
from toolbridge import Bridge

bridge = Bridge(journal="journal.db")


@bridge.tool
def ping(n: int) -> int:
    return n + 1
"""

SIDECAR_AGENT = """\
const { tools } = require("inngest_tools");
tools.ping(41).then((n) => console.log(n, require.resolve("inngest_tools")));
"""


@pytest.fixture
async def sidecar(installed: Installed) -> AsyncIterator[tuple[Path, str]]:
    app = installed.root / "sidecar"
    app.mkdir()
    (app / "sidecar_app.py").write_text(SIDECAR_APP)
    toolbridge = installed.venv / "bin" / "toolbridge"
    process = await asyncio.create_subprocess_exec(
        toolbridge,
        "serve",
        "sidecar_app:bridge",
        "--socket",
        app / "toolbridge.sock",
        cwd=app,
        env=installed.env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    try:
        line = (await asyncio.wait_for(process.stdout.readline(), WAIT)).decode().strip()
        assert line.startswith("TOOLBRIDGE_ADDRESS="), line
        yield app, line.removeprefix("TOOLBRIDGE_ADDRESS=")
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), WAIT)


async def test_an_npm_project_calls_a_sidecar_with_two_variables(
    installed: Installed, sidecar: tuple[Path, str]
) -> None:
    app, address = sidecar
    toolbridge = installed.venv / "bin" / "toolbridge"
    mint = ["token", "mint", "sidecar_app:bridge", "--run", "vm-1", "--tool", "ping"]
    token = (
        await asyncio.to_thread(artifacts.run, [toolbridge, *mint], cwd=app, env=installed.env())
    ).splitlines()[0]
    (installed.project / "agent.js").write_text(SIDECAR_AGENT)
    node = shutil.which("node")
    assert node is not None
    out = await asyncio.to_thread(
        artifacts.run,
        [node, "agent.js"],
        cwd=installed.project,
        env={"TOOLBRIDGE_ADDRESS": address, "TOOLBRIDGE_TOKEN": token},
    )
    answer, module = out.split()
    assert answer == "42"
    assert Path(module) == installed.project / "node_modules" / "inngest_tools" / "index.js"
