"""``toolbridge doctor``: whether this machine can run what toolbridge starts, and what to do.

Each line is one thing the daemon or its sandboxes need, ``ok`` or ``missing`` with the fix,
or ``note`` for what only another launcher would need or what changes no outcome. The checks
look at the machine as a user would (PATH, kernel settings, directories); then, when nothing
the chosen launcher needs is missing, a bridge runs a Python command, a Node command and a
TypeScript snippet that each call a tool, under that launcher: the proof that the pieces fit.
Exit status 1 when anything the launcher needs is missing, 0 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from packaging.requirements import Requirement

from toolbridge import Bridge, ToolbridgeError
from toolbridge._journal.sqlite.files import DAMAGED_HINT, SQLITE_HEADER

NODE_MINIMUM = (20, 6)
"""The ``engines`` of the Node client's package.json."""
INSTALL_NODE = "install Node.js 20.6 or later (apt-get install -y nodejs, or https://nodejs.org)"
INSTALL_BWRAP = "install bubblewrap: apt-get install -y bubblewrap (Fedora: dnf install -y bubblewrap)"
PROBE_TIMEOUT = 120.0

Status = Literal["ok", "missing", "note"]


@dataclass(frozen=True)
class Check:
    """One line of the report: what was checked, what was found, and the fix when missing."""

    status: Status
    name: str
    detail: str

    def line(self) -> str:
        return f"{self.status:<8} {self.name}: {self.detail}"


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add ``doctor`` to the ``toolbridge`` parser."""
    doctor = commands.add_parser(
        "doctor",
        help="check what this machine needs to run sandboxes, and say what to fix",
        description=(
            "Check Python, Node, bubblewrap and user namespaces, cgroups, the runtime cache and "
            "the journal's folder, then run a command of each kind under the launcher. Exit "
            "status 1 when something the launcher needs is missing."
        ),
    )
    doctor.add_argument(
        "--sandbox",
        choices=["process", "bwrap"],
        default="process",
        help="the launcher to check for (process)",
    )
    doctor.add_argument(
        "--journal", default="toolbridge.db", metavar="PATH", help="the journal file to check (toolbridge.db)"
    )
    doctor.set_defaults(handler=_doctor)


def _egress(sandbox: str) -> Check:
    """Whether ``egress=`` can be served, and whether this launcher enforces it."""
    for module in ("cryptography", "h11"):
        try:
            importlib.metadata.version(module)
        except importlib.metadata.PackageNotFoundError:
            return Check("note", "egress", f"{module} is not installed: pip install 'toolbridge[egress]'")
    if sandbox == "bwrap":
        return Check("ok", "egress", "enforced: a bwrap command reaches the network only through its door")
    return Check(
        "note",
        "egress",
        "offered, not enforced: the process launcher has no network namespace, so a command can go "
        "around its door (placeholders still keep secrets out of it); use --sandbox bwrap to enforce",
    )


def _python() -> Check:
    version = ".".join(map(str, sys.version_info[:3]))
    try:
        ours = importlib.metadata.distribution("toolbridge")
        client = importlib.metadata.version("inngest-tools")
    except importlib.metadata.PackageNotFoundError as exc:
        return Check("missing", "python", f"{exc.name} is not installed: pip install toolbridge")
    wanted = [Requirement(r) for r in ours.requires or [] if Requirement(r).name == "inngest-tools"]
    if not all(r.specifier.contains(client, prereleases=True) for r in wanted):
        return Check(
            "missing",
            "python",
            f"toolbridge {ours.version} needs {wanted[0]}, but inngest-tools {client} is installed: "
            "pip install --upgrade toolbridge inngest-tools",
        )
    return Check(
        "ok", "python", f"{version} ({sys.executable}); toolbridge {ours.version}, inngest-tools {client}"
    )


def _node() -> Check:
    node = shutil.which("node")
    if node is None:
        return Check(
            "missing", "node", f"not on PATH (Node commands and TypeScript snippets need it): {INSTALL_NODE}"
        )
    try:
        said = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check("missing", "node", f"{node} does not run ({exc}): {INSTALL_NODE}")
    match = re.fullmatch(r"v(\d+)\.(\d+)\.\d+\S*", said.strip())
    if match is None:
        return Check("missing", "node", f"{node} --version said {said.strip()!r}: {INSTALL_NODE}")
    if (int(match[1]), int(match[2])) < NODE_MINIMUM:
        return Check("missing", "node", f"{said.strip()} at {node} is older than 20.6: {INSTALL_NODE}")
    return Check("ok", "node", f"{said.strip()} ({node})")


def _needed_by(sandbox: str) -> Status:
    return "missing" if sandbox == "bwrap" else "note"


def _bubblewrap(sandbox: str) -> Check:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Check(
            _needed_by(sandbox), "bubblewrap", f"not on PATH (sandbox='bwrap' needs it): {INSTALL_BWRAP}"
        )
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        return Check(
            _needed_by(sandbox),
            "bubblewrap",
            f"{bwrap} is there, but setpriv is not (a root daemon drops to an unprivileged uid "
            "with it): apt-get install -y util-linux",
        )
    return Check("ok", "bubblewrap", bwrap)


def _read_number(path: str) -> int | None:
    try:
        return int(Path(path).read_text().strip())
    except (OSError, ValueError):
        return None


def _user_namespaces(sandbox: str) -> Check:
    needed = _needed_by(sandbox)
    limit = _read_number("/proc/sys/user/max_user_namespaces")
    if limit == 0:
        return Check(needed, "user namespaces", "disabled: sysctl -w user.max_user_namespaces=15000")
    if os.geteuid() != 0:
        if _read_number("/proc/sys/kernel/unprivileged_userns_clone") == 0:
            return Check(
                needed,
                "user namespaces",
                "unprivileged ones are disabled: sysctl -w kernel.unprivileged_userns_clone=1",
            )
        if _read_number("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1:
            return Check(
                needed,
                "user namespaces",
                "AppArmor restricts unprivileged ones: allow them for bwrap with an AppArmor profile "
                "(or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0)",
            )
    return Check("ok", "user namespaces", "allowed" + (f" (at most {limit})" if limit else ""))


def _cgroups() -> Check:
    """Informational: the bwrap launcher uses writable cgroup v1 controllers, else rlimits."""
    try:
        mountinfo = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return Check(
            "note", "cgroups", "cannot read /proc/self/mountinfo: sandboxes are limited by rlimits only"
        )
    v1: dict[str, str] = {}
    unified = False
    for line in mountinfo.splitlines():
        fields, _, tail = line.partition(" - ")
        parts, rest = fields.split(), tail.split()
        if len(parts) < 5 or len(rest) < 3:
            continue
        unified = unified or rest[0] == "cgroup2"
        if rest[0] == "cgroup":
            for controller in ("memory", "pids", "cpu"):
                if controller in rest[2].split(","):
                    v1.setdefault(controller, parts[4])
    writable = sorted(c for c, mount in v1.items() if os.access(mount, os.W_OK))
    if writable:
        return Check("ok", "cgroups", f"v1 {', '.join(writable)} writable: bwrap sandboxes get cgroup limits")
    kind = "a unified cgroup v2 hierarchy (not used yet)" if unified else "no writable cgroup v1 controller"
    return Check(
        "note", "cgroups", f"{kind}: bwrap sandboxes are limited by rlimits (run as root for cgroup v1)"
    )


def _cache_dir() -> Path:
    """Where the daemon caches sandbox runtimes (as docs/get-started/install.md says)."""
    configured = os.environ.get("TOOLBRIDGE_RUNTIME_DIR")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "toolbridge" / "runtime"


def _writable(directory: Path) -> str | None:
    """Why files cannot be created in ``directory`` (created if missing), or ``None``."""
    existing = next((p for p in (directory, *directory.parents) if p.exists()), Path("/"))
    if not existing.is_dir():
        return f"{existing} is not a directory"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not writable by this user"
    return None


def _runtime_cache() -> Check:
    cache = _cache_dir()
    problem = _writable(cache)
    if problem is not None:
        return Check(
            "missing",
            "runtime cache",
            f"{cache}: {problem}: set TOOLBRIDGE_RUNTIME_DIR to a writable directory",
        )
    built = sorted(p.name for p in cache.glob("*-*") if (p / "ready").exists()) if cache.is_dir() else []
    return Check("ok", "runtime cache", f"{cache} ({len(built)} runtime(s) built)")


def _journal(path: Path) -> Check:
    where = path.absolute()
    problem = _writable(where.parent)
    if problem is not None:
        return Check(
            "missing",
            "journal",
            f"{where}: {problem} (SQLite writes its -wal file beside it): choose another path",
        )
    if not where.exists():
        return Check("ok", "journal", f"{where} (created when a bridge opens it)")
    return _journal_file(where)


def _journal_file(where: Path) -> Check:
    """An existing journal: a toolbridge journal, whole (SQLite's integrity check), private."""
    if where.stat().st_size == 0:
        return Check("missing", "journal", f"{where} is empty (0 bytes), not a journal: {DAMAGED_HINT}")
    with where.open("rb") as file:
        if file.read(len(SQLITE_HEADER)) != SQLITE_HEADER:
            return Check(
                "missing",
                "journal",
                f"{where} is not a readable SQLite file (garbled header): {DAMAGED_HINT}",
            )
    try:
        # Read-only, and never creating a -wal of its own; a live journal's -wal is read.
        with contextlib.closing(sqlite3.connect(f"{where.as_uri()}?mode=ro", uri=True)) as db:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "schema_migrations" not in tables and not {"runs", "steps"} <= tables:
                shown = ", ".join(sorted(tables)[:5]) or "none"
                return Check("missing", "journal", f"{where} is another program's database (tables: {shown})")
            found = [row[0] for row in db.execute("PRAGMA integrity_check(20)")]
            runs, steps = (db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("runs", "steps"))
    except sqlite3.Error as exc:
        return Check("missing", "journal", f"{where}: SQLite cannot read it ({exc}): {DAMAGED_HINT}")
    if found != ["ok"]:
        shown = "; ".join(found[:3])
        return Check(
            "missing",
            "journal",
            f"{where}: the integrity check found {len(found)} problem(s): {shown}: {DAMAGED_HINT}",
        )
    if where.stat().st_mode & 0o077:
        return Check(
            "note", "journal", f"{where} is readable by others: chmod 600 it (a bridge opening it does)"
        )
    return Check("ok", "journal", f"{where} (integrity check ok; {runs} runs, {steps} steps)")


def _ping(n: int) -> int:
    return n + 1


PYTHON_PROBE = "import asyncio\nfrom inngest_tools import tools\nprint(asyncio.run(tools.ping(1)))\n"
NODE_PROBE = 'require("inngest_tools").tools.ping(1).then((n) => console.log(n));\n'


async def _probes(sandbox: Literal["process", "bwrap"], work: Path) -> list[Check]:
    """A command of each kind, calling a tool, under the launcher, in ``work``."""
    checks: list[Check] = []
    tools = {"ping": _ping}
    try:
        async with Bridge(journal=None, sandbox=sandbox) as bridge, bridge.run("doctor") as step:

            async def command(name: str, line: str) -> str:
                result = await step.sandbox.commands.run(
                    name, line, tools=tools, cwd=work, timeout=PROBE_TIMEOUT
                )
                if result.exit_code != 0:
                    raise ToolbridgeError(f"exit status {result.exit_code}: {_last_line(result.stderr)}")
                return result.stdout.strip()

            async def snippet() -> str:
                value = await step.sandbox.typescript(
                    "typescript",
                    "return await tools.ping(1);",
                    tools=tools,
                    output=int,
                    timeout=PROBE_TIMEOUT,
                )
                return str(value)

            probes: list[tuple[str, Callable[[], Any]]] = [
                ("a Python command", lambda: command("python", "python probe.py")),
                ("a Node command", lambda: command("node", "node probe.js")),
                ("a TypeScript snippet", snippet),
            ]
            for name, probe in probes:
                checks.append(await _timed(f"{name} under {sandbox}", probe))
    except (OSError, ToolbridgeError) as exc:
        checks.append(Check("missing", f"a bridge with sandbox={sandbox!r}", f"cannot open: {exc}"))
    return checks


def _last_line(text: str) -> str:
    """The line of a failed command's stderr that says why: the last one that is not a stack
    frame, a source excerpt or Node's version banner."""
    lines = [line.strip() for line in text.splitlines()]
    said = [line for line in lines if re.match(r"\w*(Error|Exception)\b|error:", line)]
    said = said or [line for line in lines if line and not line.startswith(("at ", "Node.js v", "^"))]
    return said[-1][:500] if said else "(no output)"


async def _timed(name: str, probe: Callable[[], Any]) -> Check:
    started = time.perf_counter()
    try:
        said = await probe()
    except ToolbridgeError as exc:
        return Check("missing", name, f"{exc}")
    if said != "2":
        return Check("missing", name, f"called a tool and got {said!r} instead of '2'")
    return Check("ok", name, f"calls a tool ({time.perf_counter() - started:.2f} s)")


def _doctor(args: argparse.Namespace) -> int:
    sandbox: Literal["process", "bwrap"] = args.sandbox
    checks = [
        _python(),
        _node(),
        _bubblewrap(sandbox),
        _user_namespaces(sandbox),
        _cgroups(),
        _runtime_cache(),
        _journal(Path(args.journal)),
        _egress(sandbox),
    ]
    for check in checks:
        print(check.line(), flush=True)
    missing = [check for check in checks if check.status == "missing"]
    if missing:
        print(f"toolbridge doctor: {len(missing)} missing for sandbox={sandbox!r}; commands not tried")
        return 1
    with tempfile.TemporaryDirectory(prefix="toolbridge-doctor-") as folder:
        work = Path(folder)
        work.chmod(0o755)  # a bwrap sandbox runs as an unprivileged uid that must read it
        (work / "probe.py").write_text(PYTHON_PROBE)
        (work / "probe.js").write_text(NODE_PROBE)
        probes = asyncio.run(_probes(sandbox, work))
    for check in probes:
        print(check.line(), flush=True)
    missing = [check for check in probes if check.status == "missing"]
    if missing:
        print(f"toolbridge doctor: {len(missing)} missing for sandbox={sandbox!r}")
        return 1
    print(f"toolbridge doctor: ready for sandbox={sandbox!r}")
    return 0
