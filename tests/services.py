"""Real servers for the tests: a throwaway PostgreSQL cluster (Debian's packages, installed when missing).

Started once per session in a temporary directory on a free port, as the
`postgres` user when the tests run as root (PostgreSQL refuses root).
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

PG_BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ensure_debian_packages(binary: str, packages: list[str]) -> None:
    """Install Debian packages when a server binary is missing (a fresh CI machine)."""
    if shutil.which(binary) or Path("/usr/sbin", binary).exists() or any((d / binary).exists() for d in PG_BIN_DIRS):
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise RuntimeError(f"{binary} is missing: install the Debian packages {' '.join(packages)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=False, env=env, capture_output=True)
    subprocess.run(["apt-get", "install", "-y", "-qq", *packages], check=True, env=env, capture_output=True)


def _pg_bin(name: str) -> str:
    for d in PG_BIN_DIRS:
        if (d / name).exists():
            return str(d / name)
    found = shutil.which(name)
    if not found:
        raise RuntimeError(f"PostgreSQL's {name} not found")
    return found


class Postgres:
    def __init__(self) -> None:
        ensure_debian_packages("initdb", ["postgresql"])
        PG_BIN_DIRS[:] = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
        self.root = Path(tempfile.mkdtemp(prefix="inspector-pg-"))
        self.port = free_port()
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self.as_user:
            shutil.chown(self.root, "postgres")
        data = self.root / "data"
        self._run(_pg_bin("initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync")
        self.data = data
        self.start()

    def start(self) -> None:
        """Start (again, after `outage`): the same cluster, data and port."""
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"), "-w", "-o",
                  f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off", "start")

    def outage(self) -> None:
        """Stop the server the way a crash or a pulled cable does (immediate: no clean shutdown)."""
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def _run(self, *cmd: str) -> None:
        subprocess.run([*self.as_user, *cmd], check=True, capture_output=True, cwd=self.root)

    def url(self, db: str = "postgres") -> str:
        return f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/{db}"

    def create_db(self, name: str, upgraded: bool = True) -> str:
        """A new database, brought to this release's schema as a plant's deploy step does (`inspector db
        upgrade`: a shared database's schema is never changed by the boxes that use it), or left empty."""
        self._run(_pg_bin("createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", name)
        if upgraded:
            from inspector.results.revisions import upgrade
            from inspector.results.store import open_engine

            engine = open_engine(self.url(name))
            upgrade(engine)
            engine.dispose()
        return self.url(name)

    def psql(self, db: str, *args: str, user: str = "postgres") -> str:
        """psql on `db` (as the superuser by default): `-c SQL` or `-f FILE`; its output."""
        done = subprocess.run([_pg_bin("psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", user, "-d", db,
                               "-v", "ON_ERROR_STOP=1", "-q", "-X", *args], check=True, capture_output=True,
                              text=True)
        return done.stdout

    def url_as(self, user: str, db: str) -> str:
        return f"postgresql+psycopg2://{user}@127.0.0.1:{self.port}/{db}"

    def stop(self) -> None:
        subprocess.run([*self.as_user, _pg_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"],
                       capture_output=True, cwd=self.root)
        time.sleep(0.1)
        shutil.rmtree(self.root, ignore_errors=True)


class Mosquitto:
    """A mosquitto broker on a free localhost port; `restart` keeps its persisted sessions (like a real outage)."""

    def __init__(self, port: int | None = None, settings: str = "allow_anonymous true\n") -> None:
        """`settings`: the listener's access lines (passwords, TLS certificates); anonymous by default."""
        ensure_debian_packages("mosquitto", ["mosquitto"])
        self.binary = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
        self.root = Path(tempfile.mkdtemp(prefix="inspector-mqtt-"))
        self.port = port or free_port()
        conf = self.root / "mosquitto.conf"
        conf.write_text(f"listener {self.port} 127.0.0.1\n{settings}persistence true\n"
                        f"persistence_location {self.root}/\nlog_dest file {self.root}/log\n"
                        + ("user root\n" if os.geteuid() == 0 else ""))
        self.conf = conf
        self.proc: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen([self.binary, "-c", str(self.conf)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"mosquitto exited: {self.proc.stderr.read().decode()}") from None
                time.sleep(0.05)
        raise RuntimeError("mosquitto did not start listening")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
