"""Real server processes a test starts and stops itself: its own redis-server (never the shared
one) and the app under gunicorn, both on free loopback ports."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import redis

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class OwnRedis:
    """A redis-server of this test alone; `stop()` kills it (an outage), `start()` brings it back."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis(port=self.port, socket_connect_timeout=0.2).ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None


class Gunicorn:
    """The app under gunicorn (sync workers) with the given environment, like production."""

    def __init__(self, env: dict[str, str], *, workers: int = 2) -> None:
        self.port = free_port()
        full_env = {**os.environ, "ALLOWED_HOSTS": "127.0.0.1", **env}
        self.log_path = ROOT / "artifacts" / f"gunicorn-{os.getpid()}-{int(time.time() * 1000)}.log"
        self.log_path.parent.mkdir(exist_ok=True)
        self.log = self.log_path.open("wb")
        command = [sys.executable, "-m", "gunicorn", "crowdnotes_site.wsgi", "-w", str(workers)]
        command += ["-b", f"127.0.0.1:{self.port}", "--timeout", "60"]
        self.proc = subprocess.Popen(
            command,
            cwd=ROOT,
            env=full_env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while self.get("/healthz")[0] != 200:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"gunicorn did not start: {self.log_path.read_text()[-3000:]}")
            time.sleep(0.2)

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=30) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()
        except OSError:
            return 0, ""

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.log.close()
