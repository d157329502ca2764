"""A small in-process cache for page parts that cost much to build and little to key.

Each web worker keeps its own (no network round trip, nothing to invalidate across processes,
nothing that breaks when Redis is down). Keys carry the data the part is built from (or a
version of it), so a hit is never stale; `max_age_s` bounds the age of parts whose key is a
cheap version that some rare write path does not move (the caller says which, and shows when the
part was built). Thread-safe; least recently used entries go first past `size`."""

from __future__ import annotations

import hashlib
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

V = TypeVar("V")


@dataclass(frozen=True)
class Built(Generic[V]):
    value: V
    built_at: float  # time.time() when it was built
    hit: bool


class Memo(Generic[V]):
    def __init__(self, size: int = 64, max_age_s: float | None = None) -> None:
        self.size = size
        self.max_age_s = max_age_s
        self._entries: OrderedDict[Hashable, tuple[V, float]] = OrderedDict()
        self._lock = threading.Lock()
        _ALL.add(self)

    def get_or_build(self, key: Hashable, build: Callable[[], V]) -> Built[V]:
        now = time.time()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and (self.max_age_s is None or now - entry[1] < self.max_age_s):
                self._entries.move_to_end(key)
                return Built(entry[0], entry[1], hit=True)
        value = build()  # outside the lock: two threads may build the same part once each
        with self._lock:
            self._entries[key] = (value, now)
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return Built(value, now, hit=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


_ALL: weakref.WeakSet[Memo[Any]] = weakref.WeakSet()


def clear_all() -> None:
    """Empty every cache of this process (tests: a database emptied between tests may reuse ids)."""
    for memo in list(_ALL):
        memo.clear()


def content_key(*parts: object) -> str:
    """A short digest of the given values' reprs (the data a part is built from)."""
    return hashlib.blake2b(repr(parts).encode(), digest_size=16).hexdigest()
