"""Installed as users install it: wheels and an npm tarball, no checkout, no index.

Builds both distributions (sdist, then the wheel from the sdist) and the npm tarball, installs
the wheels into a fresh venv with ``pip install --no-index --find-links DIST toolbridge`` and
the tarball into an empty Node project, all in a temp dir outside the checkout, and runs every
kind of command from there with PYTHONPATH, NODE_PATH and TOOLBRIDGE_NODE_CLIENT unset.

Third-party wheels (grpcio, pydantic, ...) come from a wheel cache filled once by
``pip download`` with the exact versions the development venv has (kept in pytest's cache):
so the install needs no index, resolves ``toolbridge`` and ``inngest-tools`` from DIST alone,
and tests the same third-party versions as the rest of the suite. Filling the cache the first
time needs PyPI; so does ``npm install`` of the tarball's dependencies (from npm's cache when it
has them), as it would for a user.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

CHECKOUT = Path(__file__).resolve().parents[2]
HOST = Path(__file__).with_name("host.py")
OURS = {"toolbridge", "inngest-tools"}
WAIT = 120.0

pytestmark = pytest.mark.timeout(300)  # building and installing come first, in the fixture
NPM_VERSION_FILE = CHECKOUT / "clients" / "node" / "package.json"


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


def _run(args: list[str | Path], *, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=WAIT, check=False
    )
    assert done.returncode == 0, (
        f"{args} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done.stdout


def _third_party_pins() -> list[str]:
    """``name==version`` of every distribution toolbridge needs at run time, as installed here."""
    environment = {key: str(value) for key, value in default_environment().items()} | {"extra": ""}
    pins: dict[str, str] = {}
    queue = ["toolbridge"]
    while queue:
        name = canonicalize_name(queue.pop())
        if name in pins:
            continue
        dist = importlib.metadata.distribution(name)
        pins[name] = dist.version
        for line in dist.requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate(environment):
                queue.append(requirement.name)
    return sorted(f"{name}=={version}" for name, version in pins.items() if name not in OURS)


def _wheel_cache(cache_dir: Path) -> Path:
    pins = _third_party_pins()
    listing = cache_dir / "pins.txt"
    if not listing.is_file() or listing.read_text() != "\n".join(pins):
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--only-binary=:all:",
                "--no-deps",
                "--dest",
                cache_dir,
                *pins,
            ],
            cwd=cache_dir,
        )
        listing.write_text("\n".join(pins))
    return cache_dir


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Installed:
    root = tmp_path_factory.mktemp("installed")
    assert not root.is_relative_to(CHECKOUT)
    dist = root / "dist"
    for source in (CHECKOUT, CHECKOUT / "clients" / "python"):
        _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", dist, source], cwd=root)
    _run(["npm", "pack", "--silent", "--pack-destination", dist, CHECKOUT / "clients" / "node"], cwd=root)
    wheels = _wheel_cache(request.config.cache.mkdir("install-wheels"))

    venv = root / "venv"
    _run([sys.executable, "-m", "venv", venv], cwd=root)
    # No pip.conf (it may name indexes and find-links of its own), no index: DIST and the cache.
    pip_env = {"PATH": "/usr/bin:/bin", "HOME": str(root), "PIP_CONFIG_FILE": os.devnull}
    _run(
        [
            venv / "bin" / "python",
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-index",
            "--find-links",
            dist,
            "--find-links",
            wheels,
            "toolbridge",
        ],
        cwd=root,
        env=pip_env,
    )

    version = json.loads(NPM_VERSION_FILE.read_text())["version"]
    project = root / "project"
    project.mkdir()
    (project / "package.json").write_text(json.dumps({"name": "agent-project", "private": True}))
    npm_env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", str(root))}
    _run(
        [
            "npm",
            "install",
            "--prefer-offline",
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
            dist / f"inngest_tools-{version}.tgz",
        ],
        cwd=project,
        env=npm_env,
    )
    return Installed(root=root, dist=dist, venv=venv, project=project, version=version)


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
    needed += ["node_modules/@grpc/grpc-js/package.json", "node_modules/typescript/lib/typescript.js"]
    assert not [name for name in needed if client + name not in files]
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
    out = _run(
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
    token = (await asyncio.to_thread(_run, [toolbridge, *mint], cwd=app, env=installed.env())).splitlines()[0]
    (installed.project / "agent.js").write_text(SIDECAR_AGENT)
    node = shutil.which("node")
    assert node is not None
    out = await asyncio.to_thread(
        _run,
        [node, "agent.js"],
        cwd=installed.project,
        env={"TOOLBRIDGE_ADDRESS": address, "TOOLBRIDGE_TOKEN": token},
    )
    answer, module = out.split()
    assert answer == "42"
    assert Path(module) == installed.project / "node_modules" / "inngest_tools" / "index.js"
