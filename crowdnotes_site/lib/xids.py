"""X (Twitter) post and note ids: their shape, and the creation time a snowflake id encodes."""

from __future__ import annotations

import datetime as dt
import re

X_ID = re.compile(r"^[0-9]{1,19}$")
X_EPOCH_MS = 1288834974657


def snowflake_ms(x_id: int | str) -> int:
    """Unix milliseconds encoded in an X id."""
    return (int(x_id) >> 22) + X_EPOCH_MS


def snowflake_time(x_id: int | str) -> dt.datetime:
    return dt.datetime.fromtimestamp(snowflake_ms(x_id) / 1000, tz=dt.UTC)


def x_id_time(x_id: str) -> dt.datetime | None:
    """The creation time of a text that should be an X id (ids after 2010), or None when it is not one."""
    if not X_ID.match(x_id or "") or snowflake_ms(x_id) <= X_EPOCH_MS:
        return None
    return snowflake_time(x_id)
