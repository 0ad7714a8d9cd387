"""The Node client in a sandbox: ``require("inngest_tools")`` and ``import`` from any folder.

The daemon finds the Node client (``clients/node`` of a toolbridge checkout, its dependencies
installed with ``npm ci``) in ``TOOLBRIDGE_NODE_CLIENT``, or else next to the ``toolbridge``
package of a source checkout. Like the Python runtime, it is copied (hard-linked where the
file system allows) into the runtime cache as ``node-<hash>/inngest_tools``, so a sandbox
sees that directory and nothing else of the host's Node packages.

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
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from toolbridge._sandbox.runtime.cache import link_or_copy, publish_once

log = logging.getLogger("toolbridge")

__all__ = ["NODE_CLIENT_VARIABLE", "build_node_path", "find_node_client", "node_environment"]

NODE_CLIENT_VARIABLE = "TOOLBRIDGE_NODE_CLIENT"
PACKAGE = "inngest_tools"
NODE_RUNTIME_FORMAT = "2"
PRELOAD = "register.js"
RUNNER = "runner.js"
CODE_CACHE_TIMEOUT = 120.0
_REQUIRED_DEPENDENCIES = ("@grpc/grpc-js", "@grpc/proto-loader", "typescript")
_CHECKOUT_CLIENT = Path(__file__).resolve().parents[4] / "clients" / "node"


class NodeClientMissingError(Exception):
    """The Node client cannot be given to sandboxes; the message says why and what to do."""


def _package_name(directory: Path) -> str | None:
    try:
        manifest = json.loads((directory / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    name = manifest.get("name") if isinstance(manifest, dict) else None
    return name if isinstance(name, str) else None


def find_node_client() -> Path:
    """The directory of the installed Node client.

    Raises:
        NodeClientMissingError: when there is none, or its dependencies are not installed.
    """
    configured = os.environ.get(NODE_CLIENT_VARIABLE)
    client = Path(configured) if configured else _CHECKOUT_CLIENT
    if _package_name(client) != PACKAGE:
        if configured:
            raise NodeClientMissingError(
                f"{NODE_CLIENT_VARIABLE}={configured!r} is not the {PACKAGE} Node package "
                "(no package.json naming it there)"
            )
        raise NodeClientMissingError(
            f"the Node client ({PACKAGE} for Node) was not found: set {NODE_CLIENT_VARIABLE} "
            "to its directory (clients/node of a toolbridge checkout, after `npm ci` there)"
        )
    missing = [
        name
        for name in _REQUIRED_DEPENDENCIES
        if not (client / "node_modules" / name / "package.json").is_file()
    ]
    if missing:
        raise NodeClientMissingError(
            f"the Node client in {client} has no dependencies installed (missing "
            f"{', '.join(missing)}): run `npm ci` in {client}"
        )
    return client.resolve()


def _published_files(client: Path, *, dependencies: bool) -> Iterator[Path]:
    """The client's files a sandbox needs: what npm would publish, and its dependencies."""
    manifest = json.loads((client / "package.json").read_text(encoding="utf-8"))
    entries = ["package.json", *manifest.get("files", [])]
    if dependencies:
        entries.append("node_modules")
    for entry in entries:
        path = client / entry
        if path.is_file():
            yield path
        elif path.is_dir():
            yield from (p for p in sorted(path.rglob("*")) if p.is_file())


def _fingerprint(client: Path) -> str:
    digest = hashlib.sha256(f"{NODE_RUNTIME_FORMAT}\0".encode())
    for path in _published_files(client, dependencies=False):
        digest.update(f"{path.relative_to(client)}\0".encode())
        digest.update(path.read_bytes())
    # npm records the installed tree here on every install; without it, every file's size
    # and time stand in for it.
    installed = client / "node_modules" / ".package-lock.json"
    if installed.is_file():
        digest.update(installed.read_bytes())
    else:
        for path in sorted((client / "node_modules").rglob("*")):
            stat = path.stat()
            digest.update(f"{path.relative_to(client)}\0{stat.st_size}:{stat.st_mtime_ns}\0".encode())
    return digest.hexdigest()[:16]


def _publish(
    cache_dir: Path,
    root: Path,
    fill: Mapping[Path, Path | str],
    prepare: Callable[[Path], None] | None = None,
) -> None:
    """Build ``root`` from ``fill`` (target -> source file or text) once, atomically.

    ``prepare`` runs on the filled directory before it is put in place.
    """

    def build(scratch: Path) -> None:
        for relative, source in fill.items():
            target = scratch / relative
            if isinstance(source, Path):
                link_or_copy(source, target)
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
        files = _published_files(client, dependencies=True)
        fill = {Path(PACKAGE) / path.relative_to(client): path for path in files}
        _publish(cache_dir, root, fill, prepare=_build_code_cache)
    return root, None


def _build_code_cache(node_path: Path) -> None:
    """Let the TypeScript runner write its V8 code cache; snippets start faster with it.

    Without ``node``, or if it fails, snippets still work: they compile TypeScript themselves.
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
        log.warning("no code cache for TypeScript snippets: %s", exc)
        return
    if done.returncode != 0:
        log.warning("no code cache for TypeScript snippets: %s", done.stderr.decode(errors="replace")[-500:])


def node_environment(node_path: Path) -> dict[str, str]:
    """NODE_PATH and NODE_OPTIONS that let a command's ``require`` and ``import`` find the client."""
    env = {"NODE_PATH": str(node_path)}
    preload = node_path / PACKAGE / PRELOAD
    if preload.is_file():
        # NODE_OPTIONS splits on spaces unless quoted; backslashes and quotes are escaped.
        quoted = str(preload).replace("\\", "\\\\").replace('"', '\\"')
        env["NODE_OPTIONS"] = f'--require "{quoted}"'
    return env
