"""A throwaway PostgreSQL cluster in a temp dir, for the tests and the benchmarks.

Debian's ``postgresql`` package (``scripts/setup_system.sh`` installs it) gives the server
binaries under ``/usr/lib/postgresql/<version>/bin``; nothing of the system's own cluster is
used. ``initdb`` refuses to run as root, so as root the cluster runs as the unprivileged
``postgres`` user (``nobody`` where there is none), through ``runuser``. The server listens
only on a Unix socket in its own directory: no port on the machine is taken, and several
engineers' test runs never meet.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

PORT = 5432  # only names the socket file (.s.PGSQL.5432) in the cluster's private directory
USER = "toolbridge"


def server_bin_dir() -> Path | None:
    """The newest installed PostgreSQL's server binaries, or ``None`` when none is."""
    found = sorted(
        (Path(path) for path in glob.glob("/usr/lib/postgresql/*/bin") if Path(path, "initdb").exists()),
        key=lambda path: int(path.parent.name) if path.parent.name.isdigit() else 0,
    )
    if found:
        return found[-1]
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def unavailable_reason() -> str | None:
    """Why a cluster cannot be started here, or ``None`` when it can."""
    if server_bin_dir() is None:
        return "PostgreSQL is not installed (as root, `sh scripts/setup_system.sh` installs it)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser to drop to an unprivileged user for initdb"
    return None


def _run_as() -> str | None:
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    raise RuntimeError("no unprivileged user (postgres or nobody) to run PostgreSQL as")


@dataclass
class Cluster:
    """A running cluster: ``url(db)`` addresses a database in it, ``create_database()`` makes one.

    Args:
        durable: fsync and synchronous commit on (as in production, for benchmarks); off
            for tests, where a power loss never happens and speed does.
    """

    durable: bool = False
    netns: str | None = None
    """A network namespace to run the server in (tests/hosts: PostgreSQL on a host of its own)."""
    listen: str = ""
    """An address to listen on besides the socket (inside ``netns``), for clients on other hosts."""
    settings: tuple[str, ...] = ()
    """More server settings (``"name=value"``), after the cluster's own."""
    root: Path = field(init=False)
    _names: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def __post_init__(self) -> None:
        bindir = server_bin_dir()
        if bindir is None:
            raise RuntimeError(unavailable_reason())
        self._bin = bindir
        self._user = _run_as()
        # Not under pytest's tmp dirs: those are 0700 and owned by root, so the server's user
        # could not reach its data directory.
        self.root = Path(tempfile.mkdtemp(prefix="toolbridge-pg-"))
        self.data = self.root / "data"
        self.socket_dir = self.root / "socket"
        self.socket_dir.mkdir()
        if self._user is not None:
            entry = pwd.getpwnam(self._user)
            for path in (self.root, self.socket_dir):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        self.root.chmod(0o755)  # the tests (root) connect through the socket inside

    def _command(self, tool: str, *args: str) -> list[str]:
        argv = [str(self._bin / tool), *args]
        argv = argv if self._user is None else ["runuser", "-u", self._user, "--", *argv]
        return argv if self.netns is None else ["ip", "netns", "exec", self.netns, *argv]

    def _run(self, tool: str, *args: str) -> None:
        done = subprocess.run(self._command(tool, *args), capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stderr or done.stdout}")

    def start(self) -> Cluster:
        self._run("initdb", "-D", str(self.data), "-U", USER, "-A", "trust", "-E", "UTF8", "--no-sync")
        if self.listen:  # clients on the namespaces' private network only
            with open(self.data / "pg_hba.conf", "a") as hba:
                hba.write(f"host all all {self.listen.rsplit('.', 1)[0]}.0/24 trust\n")
        self._run_server()
        return self

    def _run_server(self) -> None:
        settings = [
            f"listen_addresses='{self.listen}'",
            f"unix_socket_directories='{self.socket_dir}'",
            f"port={PORT}",
            "max_connections=200",
            "shared_buffers=32MB",
        ]
        if not self.durable:
            settings += ["fsync=off", "synchronous_commit=off", "full_page_writes=off"]
        settings += self.settings
        options = " ".join(f"-c {setting}" for setting in settings)
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "-l",
            str(self.root / "server.log"),
            "start",
        )

    def restart(self, *, crash: bool = True) -> None:
        """Stop the server (at once, as a crash would, unless not ``crash``: then cleanly) and
        start it again on the same data."""
        self.halt(crash=crash)
        self.resume()

    def halt(self, *, crash: bool = True) -> None:
        """Stop the server (``immediate``: a crash; else ``fast``: sessions ended, then a clean
        shutdown), keeping its data for :meth:`resume`."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate" if crash else "fast", "-w", "stop")

    def resume(self) -> None:
        """Start the server again on its data, after :meth:`halt`."""
        self._run_server()

    def tcp_url(self, database: str = "postgres") -> str:
        """A URL for ``database`` over TCP at ``listen`` (from the namespaces' network)."""
        return f"postgresql://{USER}@{self.listen}:{PORT}/{database}"

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError):
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        """A ``postgresql://`` URL for ``database``, through the cluster's Unix socket."""
        return f"postgresql://{USER}@/{database}?host={self.socket_dir}&port={PORT}"

    def sql(self, statement: str, database: str = "postgres") -> str:
        """Run one statement with psql; returns its unaligned output."""
        argv = [
            str(self._bin / "psql"),
            "-X",
            "-q",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            str(self.socket_dir),
            "-p",
            str(PORT),
            "-U",
            USER,
            "-d",
            database,
            "-c",
            statement,
        ]
        psql = shutil.which("psql") if not Path(argv[0]).exists() else argv[0]
        argv[0] = psql or argv[0]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"psql failed: {done.stderr}")
        return done.stdout.strip()

    def create_database(self, prefix: str = "t") -> str:
        """A fresh empty database; returns its URL."""
        name = f"{prefix}_{os.getpid()}_{next(self._names)}"
        self.sql(f"CREATE DATABASE {name} STRATEGY FILE_COPY")
        return self.url(name)


@contextlib.contextmanager
def running_cluster(
    *, durable: bool = False, netns: str | None = None, listen: str = "", settings: tuple[str, ...] = ()
) -> Iterator[Cluster]:
    """A cluster for the duration of the block; stopped and removed afterwards."""
    cluster = Cluster(durable=durable, netns=netns, listen=listen, settings=settings)
    try:
        yield cluster.start()
    finally:
        cluster.stop()
