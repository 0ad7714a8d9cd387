"""The npm packages an installed package needs, found where Node would find them.

npm installs a package's dependencies inside it (``clients/node/node_modules``, as ``npm ci``
does in a checkout) or hoisted next to it (``project/node_modules/typescript`` beside
``project/node_modules/inngest_tools``, as ``npm install inngest_tools`` does). Node resolves
``require(name)`` from a file by looking in ``node_modules`` of its folder and of every folder
above; this module does the same, from each package's folder, for the names in
``dependencies`` (and ``optionalDependencies`` and ``peerDependencies`` where installed).
``devDependencies`` are never followed: ``npm ci`` installs them in a checkout for the
package's own tests (the Node client's fake daemon runs on @grpc/grpc-js), and nothing in a
sandbox or a wheel needs them.

The result maps each needed package folder to the place it takes in a layout where all of
them sit in the package's own ``node_modules``, nesting kept: the layout the daemon gives
sandboxes, and the one the ``toolbridge`` wheel carries.

Standard library only, and no toolbridge import: the wheel's build hook (``hatch_build.py``)
loads this file by its path, before toolbridge's own dependencies are installed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

MODULES = "node_modules"


def read_manifest(directory: Path) -> dict[str, Any] | None:
    """The package's ``package.json`` as a dict, or ``None`` when there is no readable one."""
    try:
        manifest = json.loads((directory / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) else None


def resolve(name: str, start: Path) -> Path | None:
    """The folder of package ``name`` as ``require`` from a file in ``start`` finds it."""
    for folder in (start, *start.parents):
        if folder.name == MODULES:
            continue  # Node never looks in node_modules/node_modules
        candidate = folder / MODULES / name
        if (candidate / "package.json").is_file():
            return candidate
    return None


@dataclass
class Closure:
    """What ``package`` needs, and where each piece goes beneath its ``node_modules``.

    Attributes:
        packages: Each needed package folder (resolved) -> its path below ``node_modules``.
        missing: ``dependencies`` not installed anywhere Node would look, as ``name (of X)``.
        conflicts: Two installed versions that would need the same place, as text.
    """

    packages: dict[Path, PurePosixPath] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)


def _names(manifest: dict[str, Any], key: str) -> list[str]:
    table = manifest.get(key)
    return sorted(table) if isinstance(table, dict) else []


def _place(source: Path, package: Path) -> PurePosixPath:
    """Where ``source`` goes: below the nearest ``node_modules`` that holds it and is
    ``package``'s own or one above it (so packages nested in others stay nested)."""
    for folder in (package, *package.parents):
        modules = folder / MODULES if folder.name != MODULES else folder
        if source.is_relative_to(modules):
            return PurePosixPath(source.relative_to(modules).as_posix())
    raise ValueError(f"{source} is not where Node looks from {package}")  # resolve() never does this


def dependency_closure(package: Path) -> Closure:
    """Every installed package ``package`` needs at run time, transitively (see module doc)."""
    package = package.resolve()
    closure = Closure()
    taken: dict[PurePosixPath, Path] = {}
    queue = [package]
    seen = {package}
    while queue:
        current = queue.pop(0)
        manifest = read_manifest(current) or {}
        wanted = [(name, True) for name in _names(manifest, "dependencies")]
        wanted += [(name, False) for name in _names(manifest, "optionalDependencies")]
        wanted += [(name, False) for name in _names(manifest, "peerDependencies")]
        for name, required in wanted:
            found = resolve(name, current)
            if found is None:
                if required:
                    of = manifest.get("name", current.name)
                    closure.missing.append(name if current == package else f"{name} (of {of})")
                continue
            found = found.resolve()
            if found in seen:
                continue
            seen.add(found)
            place = _place(found, package)
            if place in taken:
                closure.conflicts.append(f"{taken[place]} and {found} would both be {place}")
                continue
            taken[place] = found
            closure.packages[found] = place
            queue.append(found)
    return closure


def package_files(directory: Path) -> list[Path]:
    """A dependency's own files: not its nested ``node_modules`` (packages of their own, taken
    only when needed) nor ``.bin`` links."""
    files = []
    for path in sorted(directory.rglob("*")):
        relative = path.relative_to(directory).parts
        if relative[0] == MODULES or ".bin" in relative:
            continue
        if path.is_file():
            files.append(path)
    return files


def published_files(client: Path) -> list[Path]:
    """The files of ``client`` that npm would publish: ``package.json``, README, LICENSE and
    what its ``files`` names."""
    manifest = read_manifest(client) or {}
    entries = ["package.json", *manifest.get("files", [])]
    entries += [p.name for p in sorted(client.iterdir()) if p.name.upper().startswith(("README", "LICENSE"))]
    files: list[Path] = []
    for entry in dict.fromkeys(entries):
        path = client / entry
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files.extend(p for p in sorted(path.rglob("*")) if p.is_file())
    return files
