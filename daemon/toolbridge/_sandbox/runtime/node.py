"""The Node client in a sandbox: ``require("inngest_tools")`` and ``import`` from any folder.

The daemon takes the Node client from, in this order: ``TOOLBRIDGE_NODE_CLIENT`` (its
directory, installed by ``npm ci`` in ``clients/node`` or by ``npm install inngest_tools`` in a
project, dependencies hoisted next to it), the copy the ``toolbridge`` wheel carries (with its
dependencies resolved, put there at build time by ``hatch_build.py``), and ``clients/node`` of
the source checkout this package runs from. Like the Python runtime, it is copied (hard-linked
where the file system allows) into the runtime cache as ``node-<hash>/inngest_tools``, its
dependencies beneath it in ``node_modules`` wherever npm had put them, so a sandbox sees that
directory and nothing else of the host's Node packages.

A command gets ``NODE_PATH=node-<hash>``, which ``require`` searches, and
``NODE_OPTIONS=--require <register.js>``, which adds a resolve hook for ``import`` (ES modules
ignore NODE_PATH) when the script may import.

When the client cannot be found, commands get a stand-in ``inngest_tools`` instead, which
fails at ``require`` or ``import`` with the reason and the fix. Python commands do not care.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from toolbridge._sandbox.runtime import npm
from toolbridge._sandbox.runtime.cache import copy, link_or_copy, publish_once

log = logging.getLogger("toolbridge")

__all__ = [
    "NODE_CLIENT_VARIABLE",
    "NodeClient",
    "NodeClientMissingError",
    "build_node_path",
    "find_node_client",
    "node_environment",
]

NODE_CLIENT_VARIABLE = "TOOLBRIDGE_NODE_CLIENT"
PACKAGE = "inngest_tools"
NODE_RUNTIME_FORMAT = "3"
PRELOAD = "register.js"
RUNNER = "runner.js"
CODE_CACHE_TIMEOUT = 120.0
PACKAGED_CLIENT = Path(__file__).resolve().parent / "node_client"
"""Where the ``toolbridge`` wheel puts the client (absent in a source checkout)."""
CHECKOUT_CLIENT = Path(__file__).resolve().parents[4] / "clients" / "node"
"""``clients/node`` of the source checkout this package runs from (absent in a wheel)."""


class NodeClientMissingError(Exception):
    """The Node client cannot be given to sandboxes; the message says why and what to do."""


@dataclass(frozen=True)
class NodeClient:
    """The Node client found on this host, and the installed packages it needs.

    Attributes:
        directory: The ``inngest_tools`` package folder.
        dependencies: Each needed package folder -> its place below the client's
            ``node_modules`` in the sandbox's copy.
    """

    directory: Path
    dependencies: Mapping[Path, PurePosixPath]


def _locate() -> Path:
    """The client's directory: the configured one, else the wheel's, else the checkout's."""
    configured = os.environ.get(NODE_CLIENT_VARIABLE)
    if configured:
        if (npm.read_manifest(Path(configured)) or {}).get("name") != PACKAGE:
            raise NodeClientMissingError(
                f"{NODE_CLIENT_VARIABLE}={configured!r} is not the {PACKAGE} Node package "
                "(no package.json naming it there)"
            )
        return Path(configured)
    for candidate in (PACKAGED_CLIENT, CHECKOUT_CLIENT):
        if (npm.read_manifest(candidate) or {}).get("name") == PACKAGE:
            return candidate
    raise NodeClientMissingError(
        f"the Node client ({PACKAGE} for Node) was not found: reinstall toolbridge from its "
        f"wheel, or set {NODE_CLIENT_VARIABLE} to the directory of an installed {PACKAGE} "
        f"(`npm install {PACKAGE}` puts it in node_modules/{PACKAGE})"
    )


def find_node_client() -> NodeClient:
    """The installed Node client and its dependencies.

    Raises:
        NodeClientMissingError: when there is none, or its dependencies are not installed.
    """
    client = _locate().resolve()
    closure = npm.dependency_closure(client)
    if closure.missing:
        raise NodeClientMissingError(
            f"the Node client in {client} misses dependencies Node cannot find from there "
            f"({', '.join(closure.missing)}): run `npm ci` in a checkout's clients/node, or "
            f"`npm install` in the project whose node_modules holds {PACKAGE}"
        )
    if closure.conflicts:
        raise NodeClientMissingError(
            f"the Node client in {client} cannot be laid out for sandboxes: "
            f"{'; '.join(closure.conflicts)}; install {PACKAGE} in a project of its own"
        )
    return NodeClient(directory=client.resolve(), dependencies=closure.packages)


def _sandbox_files(client: NodeClient) -> dict[Path, Path]:
    """Path in the sandbox's copy (below ``inngest_tools``) -> the installed file."""
    files = {path.relative_to(client.directory): path for path in npm.published_files(client.directory)}
    for source, place in client.dependencies.items():
        for path in npm.package_files(source):
            files[Path(npm.MODULES) / place / path.relative_to(source)] = path
    return files


def _own_files(client: NodeClient) -> set[Path]:
    """The client's own files in its copy: copied, not linked (it may be a checkout, edited in place)."""
    published = npm.published_files(client.directory)
    return {Path(PACKAGE) / path.relative_to(client.directory) for path in published}


def _fingerprint(client: NodeClient) -> str:
    digest = hashlib.sha256(f"{NODE_RUNTIME_FORMAT}\0".encode())
    for path in npm.published_files(client.directory):
        digest.update(f"{path.relative_to(client.directory)}\0".encode())
        digest.update(path.read_bytes())
    # A dependency changes by a new install: its package.json (version, and npm's own fields)
    # and its files' sizes and times stand for it, without reading every file.
    for source, place in sorted(client.dependencies.items(), key=lambda item: item[1]):
        digest.update(f"{place}\0".encode())
        digest.update((source / "package.json").read_bytes())
        for path in npm.package_files(source):
            stat = path.stat()
            digest.update(f"{path.relative_to(source)}\0{stat.st_size}:{stat.st_mtime_ns}\0".encode())
    return digest.hexdigest()[:16]


def _publish(
    cache_dir: Path,
    root: Path,
    fill: Mapping[Path, Path | str],
    prepare: Callable[[Path], None] | None = None,
    copied: set[Path] | None = None,
) -> None:
    """Build ``root`` from ``fill`` (target -> source file or text) once, atomically.

    ``prepare`` runs on the filled directory before it is put in place; targets in
    ``copied`` are copied, the other files hard-linked where the file system allows.
    """

    def build(scratch: Path) -> None:
        for relative, source in fill.items():
            target = scratch / relative
            if isinstance(source, Path):
                (copy if copied and relative in copied else link_or_copy)(source, target)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(source, encoding="utf-8")
        if prepare is not None:
            prepare(scratch)

    publish_once(cache_dir, root, build)


_STAND_IN_RESOLVE = """\
export async function resolve(specifier, context, nextResolve) {
  if (specifier !== "inngest_tools") return nextResolve(specifier, context);
  return { url: new URL("./index.mjs", import.meta.url).href, format: "module", shortCircuit: true };
}
"""


_STAND_IN_PRELOAD = """\
const { register } = require("node:module");
const { pathToFileURL } = require("node:url");
register("./resolve.mjs", pathToFileURL(__filename));
"""


def _stand_in(problem: str) -> dict[Path, str]:
    message = json.dumps(f"inngest_tools is not available in this sandbox: {problem}")
    package = Path(PACKAGE)
    return {
        package / "package.json": json.dumps({"name": PACKAGE, "main": "index.js"}),
        package / "index.js": (
            f"const error = new Error({message});\n"
            'error.code = "TOOLBRIDGE_NODE_CLIENT_MISSING";\nthrow error;\n'
        ),
        # The names exist so that linking an import succeeds and evaluation throws the reason.
        package / "index.mjs": (
            'import "./index.js";\nexport const tools = undefined, ToolError = undefined, '
            "definitions = undefined;\nexport default undefined;\n"
        ),
        package / "resolve.mjs": _STAND_IN_RESOLVE,
        package / PRELOAD: _STAND_IN_PRELOAD,
    }


def build_node_path(cache_dir: Path) -> tuple[Path, str | None]:
    """Build (or reuse) the directory for a command's NODE_PATH.

    Returns:
        The directory holding ``inngest_tools``, and why it is only a stand-in (``None``
        when it is the real client).
    """
    try:
        client = find_node_client()
    except NodeClientMissingError as exc:
        problem = str(exc)
        stand_in = _stand_in(problem)
        digest = hashlib.sha256(json.dumps({str(k): v for k, v in stand_in.items()}).encode())
        root = cache_dir / f"node-missing-{digest.hexdigest()[:16]}"
        _publish(cache_dir, root, stand_in)
        return root, problem
    root = cache_dir / f"node-{_fingerprint(client)}"
    if not (root / "ready").exists():
        fill: dict[Path, Path | str] = {Path(PACKAGE) / k: v for k, v in _sandbox_files(client).items()}
        _publish(cache_dir, root, fill, prepare=_build_code_cache, copied=_own_files(client))
    return root, None


def _build_code_cache(node_path: Path) -> None:
    """Let the runner write the V8 code caches: TypeScript's, and the client's own modules'.

    Commands and snippets start faster with them. Without ``node``, or if it fails, they still
    work: Node compiles the client and TypeScript from source, as it would without a cache.
    """
    runner = node_path / PACKAGE / RUNNER
    node = shutil.which("node")
    if node is None or not runner.is_file():
        return
    try:
        done = subprocess.run(
            [node, str(runner), "--build-cache"],
            env={"PATH": os.environ.get("PATH", "")},
            cwd=node_path,
            capture_output=True,
            timeout=CODE_CACHE_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("no code cache for the Node client and TypeScript snippets: %s", exc)
        return
    if done.returncode != 0:
        log.warning(
            "no code cache for the Node client and TypeScript snippets: %s",
            done.stderr.decode(errors="replace")[-500:],
        )


def node_environment(node_path: Path) -> dict[str, str]:
    """NODE_PATH and NODE_OPTIONS that let a command's ``require`` and ``import`` find the client."""
    env = {"NODE_PATH": str(node_path)}
    preload = node_path / PACKAGE / PRELOAD
    if preload.is_file():
        # NODE_OPTIONS splits on spaces unless quoted; backslashes and quotes are escaped.
        quoted = str(preload).replace("\\", "\\\\").replace('"', '\\"')
        env["NODE_OPTIONS"] = f'--require "{quoted}"'
    return env
