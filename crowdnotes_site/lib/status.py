"""The note status vocabulary of Community Notes, defined once (pure: no Django).

The strings are the ones the public data and the reference scorer use; the database stores
them too (`notes.models.NoteStatus`), the scorer names its outcomes with them
(`crowdnotes_site.lib.communitynotes.scoring.rules.STATUS_NAMES`) and the TSV readers and writers spell them from here.
"""

from __future__ import annotations

NEEDS_MORE_RATINGS = "NEEDS_MORE_RATINGS"
CURRENTLY_RATED_HELPFUL = "CURRENTLY_RATED_HELPFUL"
CURRENTLY_RATED_NOT_HELPFUL = "CURRENTLY_RATED_NOT_HELPFUL"
# Internal scorer outcomes, displayed as Needs More Ratings.
FIRM_REJECT = "FIRM_REJECT"
NEEDS_YOUR_HELP = "NEEDS_YOUR_HELP"

# The statuses a note can show (and the database can hold), with their display labels.
LABELS: dict[str, str] = {
    NEEDS_MORE_RATINGS: "Needs More Ratings",
    CURRENTLY_RATED_HELPFUL: "Currently Rated Helpful",
    CURRENTLY_RATED_NOT_HELPFUL: "Currently Rated Not Helpful",
}
SHOWN: frozenset[str] = frozenset(LABELS)
