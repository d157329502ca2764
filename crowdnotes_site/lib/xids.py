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


# A link to a post on X: x.com or twitter.com (www., mobile.), /<user>/status/<id> or /i/web/status/<id>,
# with or without the scheme, and anything after the id (/photo/1, ?s=20, #m).
_POST_LINK = re.compile(
    r"^(?:https?://)?(?:(?:www|mobile)\.)?(?:x|twitter)\.com/(?:[A-Za-z0-9_]{1,15}|i/web|i)/status(?:es)?/"
    r"([0-9]{1,19})(?:[/?#].*)?$",
    re.IGNORECASE,
)


def post_id_from_reference(reference: str) -> str | None:
    """The id of the post on X that a link (x.com or twitter.com, …/status/<id>) or a bare numeric
    id names, without leading zeros; None for anything else."""
    text = reference.strip()
    match = _POST_LINK.match(text)
    digits = match.group(1) if match else text if X_ID.match(text) else None
    if digits is None or not 0 < int(digits) < 2**63:
        return None
    return str(int(digits))
