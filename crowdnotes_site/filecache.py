"""The embedded default cache (no REDIS_URL: the demo): Django's file cache under VAR_DIR/cache,
shared by every process of the machine (web, workers, beat, commands), with `add` and `incr`
under a file lock, so a check-and-set of one process (the X request budget's probe and its
decrement) cannot interleave with another's. A per-process memory cache would keep what a worker
learns (the X budget) where no page can read it."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.filebased import FileBasedCache


class LockedFileCache(FileBasedCache):
    @contextmanager
    def _locked(self) -> Iterator[None]:
        folder = str(getattr(self, "_dir"))  # noqa: B009 - set by FileBasedCache, unknown to its stubs
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, ".lock"), "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def add(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        with self._locked():
            return super().add(key, value, timeout, version)

    def incr(self, key: Any, delta: int = 1, version: int | None = None) -> int:
        with self._locked():
            return super().incr(key, delta, version)
