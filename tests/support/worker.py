"""A real `celery worker` process against the test database and Redis (no eager mode)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import redis
from django.conf import settings

from crowdnotes_site.celery import app

ROOT = Path(__file__).resolve().parents[2]


def test_database_url() -> str:
    db = settings.DATABASES["default"]
    user = db.get("USER") or "postgres"
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{user}{password}@{host}:{port}/{db['NAME']}"


def purge_broker() -> None:
    """Drop every queued message: the Redis database, or the filesystem broker's message files
    (the demo's broker, which bench/bench_evidence_automation.py can run on)."""
    if settings.CELERY_BROKER_URL.startswith("filesystem://"):
        for message in Path(str(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"])).glob("*.msg"):
            message.unlink(missing_ok=True)
        return
    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()


# A worker must never outlive the test run that started it: one left behind by an interrupted run
# (pytest killed, a timeout) keeps consuming this broker's queues with its own, stale settings and
# takes a later run's tasks. The kernel kills ours when pytest dies (PR_SET_PDEATHSIG via
# util-linux `setpriv`), and the first worker of a run tells any worker already listening on this
# broker to shut down.
_SETPRIV = shutil.which("setpriv")
_strays_checked = False


def shut_down_stray_workers(timeout: float = 20) -> list[str]:
    """Ask every worker that answers on the test broker to shut down; return their names."""
    names = sorted({name for reply in app.control.ping(timeout=1.0) or [] for name in reply})
    if not names:
        return []
    warnings.warn(f"workers left by an earlier test run were listening on the test broker: {names}", stacklevel=2)
    app.control.shutdown(destination=names)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and app.control.ping(destination=names, timeout=1.0):
        time.sleep(0.5)
    return names


class Worker:
    def __init__(
        self, *, queues: str = "default,cpu,llm", extra_env: dict[str, str] | None = None, name: str = "w1",
        beat: bool = False,
    ):  # fmt: skip
        """`beat`: run celery beat inside the worker (`-B`) with the settings' schedule, as a
        deployment's beat would (outbox_dispatch, work_sweep, ...)."""
        env = os.environ.copy()
        env.update(
            {
                "DJANGO_SETTINGS_MODULE": "crowdnotes_site.settings",
                "DATABASE_URL": test_database_url(),
                "REDIS_URL": settings.REDIS_URL,
                "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
                "SECRET_KEY": settings.SECRET_KEY,
                "EMBEDDING_MODEL": settings.EMBEDDING_MODEL,
                # Where the session warmed the model and its pre-filter table (tests/conftest.py).
                "MODEL_CACHE_DIR": str(settings.MODEL_CACHE_DIR),
                "LLM_BASE_URL": settings.LLM_BASE_URL,
                "LLM_MODEL": "scripted-model",
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                # Short connections: the test database is truncated between tests.
                "DB_CONN_MAX_AGE": "0",
            }
        )
        env.update(extra_env or {})
        global _strays_checked
        # (Remote control needs a broadcast-capable broker: Redis, as the tests use.)
        if not _strays_checked and not settings.CELERY_BROKER_URL.startswith("filesystem://"):
            shut_down_stray_workers()
            _strays_checked = True
        self.log_path = ROOT / "artifacts" / f"worker-{name}-{os.getpid()}-{int(time.time() * 1000)}.log"
        self.log_path.parent.mkdir(exist_ok=True)
        self.log = self.log_path.open("wb")
        beat_args = ["-B", "-s", str(self.log_path.with_suffix(".beat-schedule"))] if beat else []
        die_with_pytest = [_SETPRIV, "--pdeathsig", "KILL", "--"] if _SETPRIV else []
        self.proc = subprocess.Popen(
            [
                *die_with_pytest, sys.executable, "-m", "celery", "-A", "crowdnotes_site", "worker",
                "--pool=solo", "--concurrency=1", "-Q", queues, "-n", f"{name}@%h",
                "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "INFO", *beat_args,
            ],
            cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self._wait_ready()

    def _wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited early:\n{self.output()}")
            if b"ready." in self.log_path.read_bytes():
                return
            time.sleep(0.1)
        raise RuntimeError(f"worker not ready after {timeout}s:\n{self.output()}")

    def output(self) -> str:
        return self.log_path.read_bytes().decode(errors="replace")[-5000:]

    def kill(self) -> None:
        """Simulate a lost worker: SIGKILL, no chance to ack or clean up."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()
