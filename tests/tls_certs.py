"""Certificate authorities and certificates made with the real ``openssl`` command, for TLS tests.

Each is an EC P-256 key and a PEM certificate in a directory of the test's own. A leaf names its
hosts in subjectAltName (DNS names and IP addresses), is for a server or a client (extended key
usage), and may be made already expired (``days=-1``: its notAfter is a day before now, which
OpenSSL 3.0's ``x509 -days`` writes as it is told).

:func:`new_ca` gives a :class:`CA` that issues with ``openssl ca`` instead, so that any
validity window can be given (one wholly in the past, or not begun yet).
"""

from __future__ import annotations

import datetime
import ipaddress
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CA", "CertPair", "Issued", "make_ca", "make_cert", "new_ca"]


@dataclass(frozen=True)
class CertPair:
    """A certificate and its private key, both PEM files."""

    cert: Path
    key: Path


def _openssl(*args: str | Path, cwd: Path) -> None:
    subprocess.run(["openssl", *map(str, args)], cwd=cwd, check=True, capture_output=True, timeout=60)


def _new_key(directory: Path, name: str) -> Path:
    key = directory / f"{name}.key"
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key, cwd=directory)
    return key


def make_ca(directory: Path, name: str = "toolbridge test CA") -> CertPair:
    """A self-signed CA, valid for two days."""
    slug = name.replace(" ", "-")
    key = _new_key(directory, slug)
    cert = directory / f"{slug}.pem"
    _openssl(
        "req", "-x509", "-new", "-key", key, "-out", cert, "-days", "2", "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )  # fmt: skip
    return CertPair(cert=cert, key=key)


def make_cert(
    directory: Path,
    ca: CertPair,
    name: str,
    *,
    hosts: Sequence[str] = ("localhost", "127.0.0.1"),
    client: bool = False,
    days: int = 1,
) -> CertPair:
    """A leaf certificate signed by ``ca``: for ``hosts``, a server's (or a client's), ``days`` long."""
    key = _new_key(directory, name)
    request = directory / f"{name}.csr"
    cert = directory / f"{name}.pem"
    _openssl("req", "-new", "-key", key, "-out", request, "-subj", f"/CN={name}", cwd=directory)
    names = []
    for host in hosts:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            names.append(f"DNS:{host}")
        else:
            names.append(f"IP:{host}")
    extensions = directory / f"{name}.ext"
    lines = [
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature",
        f"extendedKeyUsage={'clientAuth' if client else 'serverAuth'}",
    ]
    if names:
        lines.append(f"subjectAltName={','.join(names)}")
    extensions.write_text("\n".join(lines) + "\n")
    _openssl(
        "x509", "-req", "-in", request, "-CA", ca.cert, "-CAkey", ca.key, "-CAcreateserial",
        "-out", cert, "-days", str(days), "-extfile", extensions,
        cwd=directory,
    )  # fmt: skip
    return CertPair(cert=cert, key=key)


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


def _openssl_ca(*args: str | Path, cwd: Path) -> None:
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
        _openssl_ca(
            "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key, cwd=self.dir
        )
        _openssl_ca("req", "-new", "-key", key, "-subj", f"/CN={name}", "-out", request, cwd=self.dir)
        _openssl_ca(
            "ca", "-batch", "-notext", "-config", self.dir / "ca.cnf",
            "-cert", self.cert, "-keyfile", self.key, "-in", request, "-out", cert,
            "-startdate", _stamp(start), "-enddate", _stamp(end),
            "-extfile", extensions, "-extensions", "v3",
            cwd=self.dir,
        )  # fmt: skip
        return Issued(cert, key)


def new_ca(directory: Path, name: str = "toolbridge test CA") -> CA:
    """A new CA in ``directory`` (created), valid from an hour ago for two days."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "issued").mkdir(exist_ok=True)
    (directory / "index.txt").write_text("")
    (directory / "serial").write_text("1000\n")
    (directory / "ca.cnf").write_text(_CA_CONFIG.format(dir=directory))
    key, cert = directory / "ca.key", directory / "ca.pem"
    _openssl_ca(
        "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key, cwd=directory
    )
    _openssl_ca(
        "req", "-x509", "-new", "-key", key, "-subj", f"/CN={name}", "-days", "2", "-out", cert,
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )  # fmt: skip
    return CA(directory, cert, key)
