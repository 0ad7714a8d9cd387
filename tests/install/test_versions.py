"""One version for the release: the version file, the inngest-tools range and the npm package."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]
SCRIPT = CHECKOUT / "scripts" / "set_version.py"
FILES = [
    "clients/python/inngest_tools/_version.py",
    "pyproject.toml",
    "clients/node/package.json",
    "clients/node/package-lock.json",
]


def set_version(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60, check=False
    )


def _copy(tmp_path: Path) -> Path:
    for name in FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(CHECKOUT / name, tmp_path / name)
    return tmp_path


def test_the_checkout_agrees_with_itself() -> None:
    done = set_version("--check")
    assert (done.returncode, done.stderr) == (0, "")


def test_a_new_version_is_written_everywhere(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    assert set_version("0.2.0", "--root", str(root)).returncode == 0
    assert '__version__ = "0.2.0"' in (root / FILES[0]).read_text()
    assert '  "inngest-tools>=0.2.0,<0.3",\n' in (root / "pyproject.toml").read_text()
    assert json.loads((root / "clients/node/package.json").read_text())["version"] == "0.2.0"
    lock = json.loads((root / "clients/node/package-lock.json").read_text())
    assert (lock["version"], lock["packages"][""]["version"]) == ("0.2.0", "0.2.0")
    assert set_version("--check", "--root", str(root)).returncode == 0
    assert set_version("1.0.0", "--root", str(root)).returncode == 0
    assert '  "inngest-tools>=1.0.0,<2",\n' in (root / "pyproject.toml").read_text()


def test_a_file_that_disagrees_is_named(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    manifest = root / "clients/node/package.json"
    manifest.write_text(manifest.read_text().replace('"version": "', '"version": "9', 1))
    done = set_version("--check", "--root", str(root))
    assert done.returncode == 1
    assert "clients/node/package.json: version is not" in done.stderr


def test_the_wheel_build_refuses_versions_that_disagree(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    hook = _load_hook()
    requirement = ["inngest-tools>=0.1.0,<0.2", "grpcio>=1.70"]
    hook._check_versions(root, "0.1.0", requirement)  # agrees: no error
    with pytest.raises(RuntimeError, match=r"must depend on inngest-tools of the same release"):
        hook._check_versions(root, "0.2.0", requirement)
    manifest = root / "clients/node/package.json"
    manifest.write_text(manifest.read_text().replace('"version": "0.1.0"', '"version": "0.1.1"', 1))
    with pytest.raises(RuntimeError, match=r"package.json has version '0.1.1', the release is 0.1.0"):
        hook._check_versions(root, "0.1.0", requirement)


def _load_hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("hatch_build", CHECKOUT / "hatch_build.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
