"""A throwaway PostgreSQL server for the scale-out tests (tests/protocol/test_postgres.py).

Debian's ``postgresql`` package (``/usr/lib/postgresql/<version>/bin``). ``initdb`` refuses
to run as root, so under root (CI) the server's commands run as the ``postgres`` system user
(``runuser -u postgres --``) on a temporary folder handed to it. The server listens on a Unix
socket in that folder only (``listen_addresses=''``: no TCP port is opened), trusts local
connections, and is stopped and removed after the session. Missing binaries skip the tests
locally and fail them when ``CI`` is set (CI installs the package: ``.ci/run``).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest


def _pg_bin() -> Path | None:
    """The newest ``/usr/lib/postgresql/<v>/bin`` holding ``initdb``, else ``initdb`` on PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    w = shutil.which("initdb")
    return Path(w).resolve().parent if w else None


@dataclass
class PgServer:
    """A running server: ``url(db)`` is a SQLAlchemy URL to database ``db`` over the socket."""

    bin: Path
    sockdir: Path
    user: str = "contrastlab"

    def createdb(self, name: str) -> str:
        subprocess.run([str(self.bin / "createdb"), "-h", str(self.sockdir), "-U", self.user,
                        name], check=True, capture_output=True, timeout=60)
        return self.url(name)

    def url(self, db: str) -> str:
        return f"postgresql+psycopg2://{self.user}@/{db}?host={self.sockdir}"


@pytest.fixture(scope="session")
def pg_server():
    """Start PostgreSQL for the session; yields a :class:`PgServer`; stops and deletes it."""
    pg = _pg_bin()
    if pg is None:
        msg = ("PostgreSQL server binaries (initdb) not found: apt-get install postgresql "
               "(.ci/run and scripts/env.sh do)")
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    pytest.importorskip("psycopg2")
    root = Path(tempfile.mkdtemp(prefix="clpg-", dir="/tmp"))  # short: a socket path <= 107 B
    as_pg: list[str] = []
    if os.geteuid() == 0:
        runuser = shutil.which("runuser")
        if runuser is None:
            pytest.fail("running as root without runuser: cannot start PostgreSQL as postgres")
        shutil.chown(root, "postgres", "postgres")
        as_pg = [runuser, "-u", "postgres", "--"]
    data, log = root / "data", root / "server.log"
    srv = PgServer(bin=pg, sockdir=root)

    def run(*cmd: str) -> None:
        r = subprocess.run([*as_pg, *cmd], capture_output=True, text=True, timeout=120)
        if r.returncode:
            raise RuntimeError(f"{cmd[0]} failed ({r.returncode}): {r.stdout}{r.stderr}"
                               + (log.read_text() if log.exists() else ""))

    started = False
    try:
        run(str(pg / "initdb"), "-D", str(data), "-U", srv.user, "--auth=trust", "-E", "UTF8",
            "--no-sync", "--no-instructions")
        opts = f"-c listen_addresses='' -k {root} -c fsync=off -c max_connections=60"
        run(str(pg / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", opts, "-w", "-t", "60",
            "start")
        started = True
        yield srv
    finally:
        if started:
            subprocess.run([*as_pg, str(pg / "pg_ctl"), "-D", str(data), "-m", "immediate",
                            "-w", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)
