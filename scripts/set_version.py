"""Set the release's version everywhere it must be written, or check that they agree.

``python scripts/set_version.py 0.2.0`` writes it to ``clients/python/inngest_tools/_version.py``
(the one place both Python distributions read it from), sets ``toolbridge``'s requirement on
``inngest-tools`` to the same release and its patches, and writes it to the npm package's
``package.json`` and ``package-lock.json``. ``--check`` changes nothing and exits 1 when they
disagree (the wheel's build hook refuses to build then, too).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

VERSION_FILE = Path("clients/python/inngest_tools/_version.py")
PYPROJECT = Path("pyproject.toml")
PACKAGE_JSON = Path("clients/node/package.json")
PACKAGE_LOCK = Path("clients/node/package-lock.json")
_VERSION_LINE = re.compile(r'^__version__ = "([^"]+)"$', re.MULTILINE)
_REQUIREMENT_LINE = re.compile(r'^  "(inngest-tools[^"]*)",$', re.MULTILINE)


def client_range(version: str) -> str:
    """The ``inngest-tools`` versions a ``toolbridge`` release works with: its own release and
    later patches of it (0.x: the same minor; from 1.0: the same major)."""
    v = Version(version)
    upper = f"{v.major}.{v.minor + 1}" if v.major == 0 else f"{v.major + 1}"
    return f"inngest-tools>={version},<{upper}"


def problems(root: Path) -> list[str]:
    """Where the files under ``root`` disagree with the version file."""
    found = _VERSION_LINE.search((root / VERSION_FILE).read_text())
    if found is None:
        return [f"{VERSION_FILE} has no __version__ line"]
    version = found[1]
    said = []
    requirement = _REQUIREMENT_LINE.search((root / PYPROJECT).read_text())
    if requirement is None or not Requirement(requirement[1]).specifier.contains(version, prereleases=True):
        said.append(f"{PYPROJECT}: the inngest-tools requirement does not admit {version}")
    if json.loads((root / PACKAGE_JSON).read_text())["version"] != version:
        said.append(f"{PACKAGE_JSON}: version is not {version}")
    lock = json.loads((root / PACKAGE_LOCK).read_text())
    if lock.get("version") != version or lock["packages"][""].get("version") != version:
        said.append(f"{PACKAGE_LOCK}: version is not {version}")
    return said


def set_version(root: Path, version: str) -> None:
    Version(version)  # refuses what is not a version
    path = root / VERSION_FILE
    path.write_text(_VERSION_LINE.sub(f'__version__ = "{version}"', path.read_text()))
    path = root / PYPROJECT
    path.write_text(_REQUIREMENT_LINE.sub(f'  "{client_range(version)}",', path.read_text(), count=1))
    for manifest in (PACKAGE_JSON, PACKAGE_LOCK):
        path = root / manifest
        data = json.loads(path.read_text())
        data["version"] = version
        if "packages" in data:
            data["packages"][""]["version"] = version
        path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("version", nargs="?", help="the new version (omit with --check)")
    parser.add_argument("--check", action="store_true", help="only check that the files agree")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args(argv)
    if not args.check:
        if args.version is None:
            parser.error("give a version, or --check")
        set_version(args.root, args.version)
    said = problems(args.root)
    for problem in said:
        print(f"set_version: {problem}", file=sys.stderr)
    return 1 if said else 0


if __name__ == "__main__":
    sys.exit(main())
