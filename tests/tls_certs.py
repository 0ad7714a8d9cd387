"""Certificates made by the real ``openssl`` program, for the TLS tests.

A throwaway CA signs server and client certificates, valid now or chosen to be broken in one
way each (expired, for another host, from another CA), with ``openssl ca`` so that any
validity window can be given, including one in the past. Keys are P-256: quick to make.
"""

from __future__ import annotations

import datetime
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CA", "Issued", "make_ca"]

_CA_CONFIG = """\
[ ca ]
default_ca = tb
[ tb ]
dir = {dir}
database = $dir/index.txt
new_certs_dir = $dir/issued
serial = $dir/serial
default_md = sha256
policy = anything
unique_subject = no
copy_extensions = none
[ anything ]
commonName = supplied
"""


def _openssl(*args: str | Path, cwd: Path) -> None:
    done = subprocess.run(["openssl", *map(str, args)], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(map(str, args))} failed: {done.stderr.strip()}")


def _stamp(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).strftime("%Y%m%d%H%M%SZ")


@dataclass(frozen=True)
class Issued:
    """A certificate and its key, as PEM files."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class CA:
    """A throwaway certificate authority in ``dir``."""

    dir: Path
    cert: Path
    key: Path

    def issue(
        self,
        name: str,
        *,
        hosts: tuple[str, ...] = ("localhost", "127.0.0.1"),
        client: bool = False,
        not_before: datetime.datetime | None = None,
        not_after: datetime.datetime | None = None,
    ) -> Issued:
        """A certificate for ``hosts`` (names or IP addresses), for a server unless ``client``.

        Valid from an hour ago for a day unless ``not_before`` / ``not_after`` say otherwise.
        """
        now = datetime.datetime.now(datetime.UTC)
        start = not_before or now - datetime.timedelta(hours=1)
        end = not_after or now + datetime.timedelta(days=1)
        key = self.dir / f"{name}.key"
        request = self.dir / f"{name}.csr"
        cert = self.dir / f"{name}.pem"
        extensions = self.dir / f"{name}.ext"
        alt = ",".join(f"IP:{h}" if h.replace(".", "").isdigit() or ":" in h else f"DNS:{h}" for h in hosts)
        usage = "clientAuth" if client else "serverAuth"
        extensions.write_text(
            "[ v3 ]\nbasicConstraints = critical,CA:FALSE\nkeyUsage = critical,digitalSignature\n"
            f"extendedKeyUsage = {usage}\n" + (f"subjectAltName = {alt}\n" if alt else "")
        )
        _openssl(
            "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key, cwd=self.dir
        )
        _openssl("req", "-new", "-key", key, "-subj", f"/CN={name}", "-out", request, cwd=self.dir)
        _openssl(
            "ca", "-batch", "-notext", "-config", self.dir / "ca.cnf",
            "-cert", self.cert, "-keyfile", self.key, "-in", request, "-out", cert,
            "-startdate", _stamp(start), "-enddate", _stamp(end),
            "-extfile", extensions, "-extensions", "v3",
            cwd=self.dir,
        )  # fmt: skip
        return Issued(cert, key)


def make_ca(directory: Path, name: str = "toolbridge test CA") -> CA:
    """A new CA in ``directory`` (created), valid from an hour ago for two days."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "issued").mkdir(exist_ok=True)
    (directory / "index.txt").write_text("")
    (directory / "serial").write_text("1000\n")
    (directory / "ca.cnf").write_text(_CA_CONFIG.format(dir=directory))
    key, cert = directory / "ca.key", directory / "ca.pem"
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key, cwd=directory)
    _openssl(
        "req", "-x509", "-new", "-key", key, "-subj", f"/CN={name}", "-days", "2", "-out", cert,
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )  # fmt: skip
    return CA(directory, cert, key)
