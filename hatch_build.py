"""The build hook of the ``toolbridge`` distribution: the Node client goes into the wheel.

Node sandboxes need the ``inngest_tools`` npm package and its dependencies: ``@bufbuild/protobuf``
(the client's messages; it speaks gRPC over ``node:http2``), and ``typescript``, which the
TypeScript runner needs: an optional peer dependency of the npm package, installed in the
checkout (a devDependency too), so the wheel carries it for the daemon's own TypeScript
snippets. The other ``devDependencies``, for the client's tests and ``make proto``, are never
taken. The wheel carries them, resolved, below
``toolbridge/_sandbox/runtime/node_client`` (where the daemon looks before a checkout), so that
``pip install toolbridge`` alone runs Node commands and TypeScript snippets: no npm at run
time. They come from ``clients/node`` after ``npm ci`` (``make node-deps``); the sdist carries
the same files at the same paths, so a wheel built from it needs no npm either.

What a dependency brings that nothing runs is left out (see ``_needed``): the Node client
then takes 1.7 MB of the wheel (9.3 MB unpacked, nearly all of it TypeScript's compiler)
instead of 4.5 MB (24 MB unpacked).

The hook also refuses to build when the versions disagree: ``inngest_tools/_version.py`` is
the one place a version is written, and the ``inngest-tools`` range and ``package.json``
must agree with it.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface
from packaging.requirements import Requirement

NODE_CLIENT = PurePosixPath("clients/node")
IN_WHEEL = PurePosixPath("toolbridge/_sandbox/runtime/node_client")
RESOLVER = "daemon/toolbridge/_sandbox/runtime/npm.py"
CLIENT_DISTRIBUTION = "inngest-tools"

# Of typescript, the runner loads lib/typescript.js alone (it only transpiles): the compiler
# CLI, the language server, the lib.*.d.ts declarations and the translated messages stay out.
_ONLY = {"typescript": {"package.json", "LICENSE.txt", "ThirdPartyNoticeText.txt", "lib/typescript.js"}}
# Of @bufbuild/protobuf, the client loads the CommonJS build alone (index.mjs imports index.js).
_ONLY_UNDER = {"@bufbuild/protobuf": ("dist/cjs/",)}
# Type declarations, TypeScript sources and source maps are never loaded by Node at run time.
_NEVER = (".ts", ".mts", ".cts", ".map")


def _load_resolver(root: Path) -> ModuleType:
    """The daemon's own npm resolution (standard library only), loaded by its path."""
    spec = importlib.util.spec_from_file_location("_toolbridge_build_npm", root / RESOLVER)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while building
    spec.loader.exec_module(module)
    return module


def _needed(name: str, relative: PurePosixPath) -> bool:
    """Whether a dependency's file is one Node may load (or its licence)."""
    if name in _ONLY:
        return relative.as_posix() in _ONLY[name]
    nested = len(relative.parts) > 1  # the package's own top-level files (package.json, LICENSE) stay
    if name in _ONLY_UNDER and nested and not relative.as_posix().startswith(_ONLY_UNDER[name]):
        return False
    return not relative.name.endswith(_NEVER)


def _check_versions(root: Path, version: str, dependencies: list[str]) -> None:
    ranges = [Requirement(line) for line in dependencies if Requirement(line).name == CLIENT_DISTRIBUTION]
    if not ranges or not all(r.specifier.contains(version, prereleases=True) for r in ranges):
        raise RuntimeError(
            f"toolbridge {version} must depend on {CLIENT_DISTRIBUTION} of the same release, but "
            f"pyproject.toml says {[str(r) for r in ranges]}: change it (scripts/set_version.py)"
        )
    manifest = json.loads((root / NODE_CLIENT / "package.json").read_text(encoding="utf-8"))
    if manifest.get("version") != version:
        raise RuntimeError(
            f"clients/node/package.json has version {manifest.get('version')!r}, the release is "
            f"{version}: change it (scripts/set_version.py)"
        )


def node_client_files(root: Path) -> dict[PurePosixPath, Path]:
    """Path below the client's folder -> source file: what the wheel and the sdist carry."""
    npm = _load_resolver(root)
    client = root / NODE_CLIENT
    closure = npm.dependency_closure(client)
    if closure.missing or closure.conflicts:
        raise RuntimeError(
            f"the Node client's dependencies are not installed in {client} "
            f"({', '.join(closure.missing + closure.conflicts)}): run `make node-deps` "
            "(npm ci in clients/node) before building"
        )
    files = {PurePosixPath(p.relative_to(client).as_posix()): p for p in npm.published_files(client)}
    for source, place in closure.packages.items():
        name = (npm.read_manifest(source) or {}).get("name", source.name)
        for path in npm.package_files(source):
            relative = PurePosixPath(path.relative_to(source).as_posix())
            if _needed(name, relative):
                files[PurePosixPath(npm.MODULES) / place / relative] = path
    return files


class NodeClientHook(BuildHookInterface):  # type: ignore[type-arg]
    """Adds the Node client to the wheel (and to the sdist, at its checkout path)."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        root = Path(self.root)
        _check_versions(root, self.metadata.version, self.metadata.core.dependencies)
        if self.target_name == "wheel" and version == "editable":
            return  # an editable install runs from the checkout, which has clients/node
        prefix = IN_WHEEL if self.target_name == "wheel" else NODE_CLIENT
        for relative, source in node_client_files(root).items():
            build_data["force_include"][str(source)] = str(prefix / relative)
