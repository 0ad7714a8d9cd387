"""Build the release's artifacts and install them as a user would: shared by the install test
and ``bench/first_command.py``.

Third-party wheels (grpcio, pydantic, ...) come from a wheel cache filled by ``pip download``
with the exact versions the development venv has: the install then needs no index, finds
``toolbridge`` and ``inngest-tools`` in DIST alone, and gets the third-party versions the rest
of the suite tests. Filling the cache (once) needs PyPI, as CI has.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

CHECKOUT = Path(__file__).resolve().parents[2]
NODE_CLIENT = CHECKOUT / "clients" / "node"
OURS = {"toolbridge", "inngest-tools"}
WAIT = 300.0


class CommandFailedError(AssertionError):
    """A build or install step exited non-zero; the message has its output."""


def run(args: list[str | Path], *, cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run a program to completion and return its stdout; raise with its output if it fails."""
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=WAIT, check=False
    )
    if done.returncode != 0:
        raise CommandFailedError(
            f"{args} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    return done.stdout


def release_version() -> str:
    version: str = json.loads((NODE_CLIENT / "package.json").read_text())["version"]
    return version


def build(dist: Path) -> None:
    """Both distributions (sdist, then the wheel built from that sdist) and the npm tarball."""
    for source in (CHECKOUT, CHECKOUT / "clients" / "python"):
        run([sys.executable, "-m", "build", "--no-isolation", "--outdir", dist, source], cwd=dist.parent)
    run(["npm", "pack", "--silent", "--pack-destination", dist, NODE_CLIENT], cwd=dist.parent)


def third_party_pins() -> list[str]:
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


def wheel_cache(cache_dir: Path) -> Path:
    """``cache_dir`` holding a wheel of each third-party pin (downloaded when they change)."""
    pins = third_party_pins()
    cache_dir.mkdir(parents=True, exist_ok=True)
    listing = cache_dir / "pins.txt"
    if not listing.is_file() or listing.read_text() != "\n".join(pins):
        download: list[str | Path] = [
            "pip",
            "download",
            "--quiet",
            "--only-binary=:all:",
            "--no-deps",
            "--dest",
            cache_dir,
        ]
        run([sys.executable, "-m", *download, *pins], cwd=cache_dir)
        listing.write_text("\n".join(pins))
    return cache_dir


def install_venv(venv: Path, dist: Path, wheels: Path) -> None:
    """A fresh venv with ``toolbridge`` from DIST, no index and no pip configuration."""
    run([sys.executable, "-m", "venv", venv], cwd=venv.parent)
    # pip.conf may name indexes and find-links of its own: none of it, only DIST and the cache.
    env = {"PATH": "/usr/bin:/bin", "HOME": str(venv.parent), "PIP_CONFIG_FILE": os.devnull}
    pip: list[str | Path] = [venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--no-index"]
    run([*pip, "--find-links", dist, "--find-links", wheels, "toolbridge"], cwd=venv.parent, env=env)


def install_npm_project(project: Path, tarball: Path) -> None:
    """An empty Node project, then ``npm install ./inngest_tools-<v>.tgz typescript`` in it.

    typescript is the client's optional peer dependency: a project that wants the daemon's
    TypeScript snippets to run with this client installs it, as this one does.
    """
    project.mkdir()
    (project / "package.json").write_text(json.dumps({"name": "agent-project", "private": True}))
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", str(project))}
    npm = ["npm", "install", "--prefer-offline", "--ignore-scripts", "--no-audit", "--no-fund"]
    run([*npm, tarball, "typescript@~5.9.3"], cwd=project, env=env)
