"""A real PostgreSQL server for the tests and the benchmark: `initdb` into a temporary folder,
`pg_ctl start` listening only on a unix socket in that folder, trust authentication.

The binaries are found on PATH or in Debian's /usr/lib/postgresql/<version>/bin (the
`postgresql` package, which .ci/run installs where it is missing). PostgreSQL refuses to run
as root, so as root the server runs as the `postgres` user where there is one (Debian's
package creates it), else as `nobody`, through `runuser`; the folder is handed to that user.

`PostgresServer.start()` returns a running server; `new_schema()` makes a schema of its own
for one test and returns the URL that puts a workspace in it (`options=-csearch_path=...`);
`restart()` restarts it with `pg_ctl restart -m fast` (connections are cut, as in a real
restart); `stop()` stops it and removes the folder.

The `postgres` fixture (tests/conftest.py) starts one per test session; where no binary is
found the tests using it skip with one line saying how to run them, except under CI=true,
where they fail.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import install_hint

HOW_TO_RUN = (
    "no PostgreSQL server binaries (initdb, pg_ctl): install them (Debian: apt-get install "
    "postgresql) to run the PostgreSQL tests"
)

USER = "postgres"  # the database superuser initdb creates (not the system user)


def binaries() -> Path | None:
    """The folder holding `initdb` and `pg_ctl`, or None where there is none."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(os.path.realpath(found)).parent
    versions = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: (
            int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0
        ),
    )
    return Path(versions[-1]).parent if versions else None


def _run_as() -> list[str]:
    """The prefix that runs a command as an unprivileged user (none when not root)."""
    if os.geteuid() != 0:
        return []
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return ["runuser", "-u", name, "--"]
    raise RuntimeError("running as root with neither a 'postgres' nor a 'nobody' user")


@dataclass
class PostgresServer:
    """One running server in `folder` (data in folder/data, socket in folder)."""

    folder: Path
    bin: Path
    prefix: list[str]

    @classmethod
    def start(cls) -> PostgresServer:
        """initdb and start a server in a new temporary folder.

        Raises:
            RuntimeError: no binaries, or initdb / pg_ctl failed (their output attached).
        """
        bin_dir = binaries()
        if bin_dir is None:
            raise RuntimeError(HOW_TO_RUN)
        prefix = _run_as()
        # Not under pytest's base temp: that is private to root, and the server runs as
        # another user.
        folder = Path(tempfile.mkdtemp(prefix="ctxoffload-pg-"))
        if prefix:
            user = pwd.getpwnam(prefix[2])
            os.chown(folder, user.pw_uid, user.pw_gid)
        server = cls(folder, bin_dir, prefix)
        server._pg(
            "initdb",
            "-D",
            str(folder / "data"),
            "-U",
            USER,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        )
        server._pg_ctl("start")
        return server

    def _pg(self, program: str, *args: str) -> None:
        done = subprocess.run(
            [*self.prefix, str(self.bin / program), *args],
            capture_output=True,
            text=True,
            check=False,
            cwd=self.folder,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{program} {' '.join(args)} failed:\n{done.stdout}{done.stderr}")

    def _pg_ctl(self, action: str, *args: str) -> None:
        # No TCP at all (listen_addresses ''): the socket in the folder only. fsync off: the
        # tests kill clients, never the machine.
        options = (
            f"-k {self.folder} -c listen_addresses='' -c fsync=off -c full_page_writes=off "
            "-c max_connections=400"
        )
        self._pg(
            "pg_ctl",
            action,
            "-D",
            str(self.folder / "data"),
            "-l",
            str(self.folder / "server.log"),
            "-w",
            "-t",
            "120",
            "-o",
            options,
            *args,
        )

    @property
    def url(self) -> str:
        """The URL of the `postgres` database as the superuser, over the socket."""
        return f"postgresql://{USER}@/postgres?host={self.folder}"

    def sql(self, statement: str) -> None:
        """Run one statement with psycopg (autocommit)."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as connection:
            connection.execute(statement)  # type: ignore[arg-type]

    def new_schema(self) -> str:
        """A new empty schema; the URL of a workspace in it."""
        name = f"t_{uuid.uuid4().hex[:12]}"
        self.sql(f"CREATE SCHEMA {name}")
        return f"{self.url}&options=-csearch_path%3D{name}"

    def new_database(self) -> str:
        """A new empty database; its URL."""
        name = f"d_{uuid.uuid4().hex[:12]}"
        self.sql(f"CREATE DATABASE {name}")
        return f"postgresql://{USER}@/{name}?host={self.folder}"

    def restart(self) -> None:
        """`pg_ctl restart -m fast`: every connection is cut; committed data stays."""
        self._pg_ctl("restart", "-m", "fast")

    def stop(self) -> None:
        """Stop the server at once and remove its folder."""
        subprocess.run(
            [
                *self.prefix,
                str(self.bin / "pg_ctl"),
                "stop",
                "-D",
                str(self.folder / "data"),
                "-m",
                "immediate",
                "-w",
            ],
            capture_output=True,
            check=False,
        )
        shutil.rmtree(self.folder, ignore_errors=True)


def start_or_skip() -> PostgresServer:
    """A running server; where there are no binaries, a skip saying how to run the tests
    (a failure under CI=true, where they must run)."""
    required = os.environ.get("CI") == "true"
    missing = HOW_TO_RUN if binaries() is None else None
    try:
        import psycopg  # noqa: F401
    except ImportError:
        missing = missing or f"no psycopg: {install_hint('sql')} for the PostgreSQL tests"
    if missing is not None:
        if required:
            pytest.fail(f"CI=true and {missing}")
        pytest.skip(missing)
    return PostgresServer.start()
