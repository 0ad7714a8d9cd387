"""What a sandboxed command needs to reach the daemon: interpreters that import ``inngest_tools``.

``python`` and ``python3`` in a command resolve to a small virtual environment built from the
daemon's own interpreter, holding ``inngest_tools`` and what it needs at run time (grpcio,
protobuf and their own dependencies, read from the installed packages' metadata) and nothing
else: none of the host's packages. The environment is built once per set of versions and
cached; files are hard-linked where the file system allows.
"""

from __future__ import annotations

import compileall
import hashlib
import importlib.metadata
import importlib.util
import os
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from toolbridge._sandbox.runtime.cache import copy, link_or_copy, publish_once
from toolbridge._sandbox.runtime.node import build_node_path, node_environment

RUNTIME_FORMAT = "2"  # 2: bytecode compiled at build time
SYSTEM_PATH = ("/usr/local/bin", "/usr/bin", "/bin")


@dataclass(frozen=True)
class SandboxRuntime:
    """Paths that make the in-sandbox clients importable.

    Attributes:
        root: The cached runtime directory.
        bin_dir: Put first on the command's PATH; holds ``python`` and ``python3``.
        base_prefix: The interpreter installation the virtual environment points at.
        node_path: A directory for ``NODE_PATH`` holding the Node client ``inngest_tools``
            (or a stand-in that fails with ``node_problem``).
        node_problem: Why the Node client is missing, or ``None`` when it is there.
    """

    root: Path
    bin_dir: Path
    base_prefix: Path
    node_path: Path | None = None
    node_problem: str | None = None

    @property
    def path(self) -> str:
        """The PATH of a sandboxed command."""
        return os.pathsep.join([str(self.bin_dir), *SYSTEM_PATH])

    @property
    def read_only_paths(self) -> list[Path]:
        """What a sandbox must expose for the interpreters to work."""
        paths = [self.root, self.base_prefix]
        if self.node_path is not None:
            paths.append(self.node_path)
        return paths

    @property
    def node_environment(self) -> dict[str, str]:
        """What Node needs to find the client: ``NODE_PATH``, and a hook in ``NODE_OPTIONS``."""
        return {} if self.node_path is None else node_environment(self.node_path)


CLIENT_DISTRIBUTION = "inngest-tools"
CLIENT_PACKAGE = "inngest_tools"


def _client_dir() -> Path:
    spec = importlib.util.find_spec(CLIENT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"cannot find the {CLIENT_PACKAGE!r} package to give to sandboxes")
    return Path(next(iter(spec.submodule_search_locations)))


def _dependency_closure(root: str) -> list[importlib.metadata.Distribution]:
    """The installed distributions ``root`` needs at run time, without ``root`` itself."""
    environment = {key: str(value) for key, value in default_environment().items()}
    environment["extra"] = ""
    seen: dict[str, importlib.metadata.Distribution] = {}
    queue = [root]
    while queue:
        name = canonicalize_name(queue.pop())
        if name in seen:
            continue
        dist = importlib.metadata.distribution(name)
        seen[name] = dist
        for line in dist.requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate(environment):
                queue.append(requirement.name)
    del seen[canonicalize_name(root)]
    return list(seen.values())


def _installed_files(dist: importlib.metadata.Distribution) -> list[tuple[Path, Path]]:
    """(source, path relative to site-packages) of a distribution's importable files."""
    files = []
    for entry in dist.files or []:
        relative = Path(str(entry))
        if relative.parts[0] == ".." or "__pycache__" in relative.parts:
            continue
        if relative.parts[0].endswith((".dist-info", ".pth")):
            continue
        files.append((Path(str(dist.locate_file(entry))), relative))
    return files


def _fingerprint(client: Path, dependencies: list[importlib.metadata.Distribution]) -> str:
    digest = hashlib.sha256()
    digest.update(f"{RUNTIME_FORMAT}\0{sys.version}\0{sys._base_executable}\0".encode())  # type: ignore[attr-defined]
    for dist in sorted(dependencies, key=lambda d: d.metadata["Name"]):
        digest.update(f"{dist.metadata['Name']}={dist.version}\0".encode())
    # The client may be an editable checkout: hash its files, not its version.
    for path in sorted(client.rglob("*.py")):
        digest.update(str(path.relative_to(client)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _populate(site: Path, client: Path, dependencies: list[importlib.metadata.Distribution]) -> None:
    for source in client.rglob("*"):
        if source.is_file() and "__pycache__" not in source.parts:
            # The client may be an editable checkout: copied, never linked (see cache.copy).
            copy(source, site / CLIENT_PACKAGE / source.relative_to(client))
    for dist in dependencies:
        for source, relative in _installed_files(dist):
            if source.is_file():
                link_or_copy(source, site / relative)


def default_cache_dir() -> Path:
    configured = os.environ.get("TOOLBRIDGE_RUNTIME_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "toolbridge" / "runtime"


def build_runtime(cache_dir: Path | None = None, node_path: Path | None = None) -> SandboxRuntime:
    """Build (or reuse) the sandbox runtime. Safe to call from several processes at once.

    Args:
        cache_dir: Where runtimes are cached (``default_cache_dir()``).
        node_path: A ready ``NODE_PATH`` directory; by default the Node client is found and
            copied into the cache (see :mod:`toolbridge._sandbox.runtime.node`).
    """
    cache_dir = cache_dir or default_cache_dir()
    node_problem = None
    if node_path is None:
        node_path, node_problem = build_node_path(cache_dir)
    client = _client_dir()
    dependencies = _dependency_closure(CLIENT_DISTRIBUTION)
    root = cache_dir / f"py-{_fingerprint(client, dependencies)}"
    base_prefix = Path(sys.base_prefix)

    def build(scratch: Path) -> None:
        # Only the first use builds (seconds); say so, since someone is waiting on it.
        print(f"toolbridge: building the Python sandbox runtime in {root} (first use only)", file=sys.stderr)
        venv.EnvBuilder(symlinks=True, with_pip=False).create(scratch)
        version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
        _populate(scratch / "lib" / version / "site-packages", client, dependencies)
        # The sandbox cannot write bytecode (read-only, PYTHONDONTWRITEBYTECODE), so without
        # this every command compiles its imports again. Compiled under the final path (for
        # tracebacks); checked against the source's mtime as usual, so an edited file is
        # compiled afresh rather than run stale.
        compileall.compile_dir(
            scratch / "lib" / version / "site-packages",
            ddir=root / "lib" / version / "site-packages",
            quiet=2,
        )
        print("toolbridge: the Python sandbox runtime is built", file=sys.stderr)

    publish_once(cache_dir, root, build)
    return SandboxRuntime(
        root=root,
        bin_dir=root / "bin",
        base_prefix=base_prefix,
        node_path=node_path,
        node_problem=node_problem,
    )
