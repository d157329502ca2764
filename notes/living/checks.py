"""Checks of a revision's candidate that do not depend on the model that wrote it.

A candidate is offered to a person only when it stays on the post, keeps what the note says, cites
only sources that were confirmed by a person (the note's contributor or a suggester) and keeps
every source the current version cites. The two similarity checks use MiniLM, whatever model wrote
the candidate; their bounds were chosen on labelled cases (`bench/bench_revision_checks.py`, on
real notes of other posts and hand-written off-claim revisions; the table is in bench/README,
"Revision checks").

Pure: no Django import; the caller passes the embedding function."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from crowdnotes_site.lib.text_rules import find_urls

# The embedding model the similarity bounds are measured in.
MODEL = "all-MiniLM-L6-v2"
# Cosine of the candidate with the post's text, and with the note's current text (MiniLM).
MIN_POST_SIMILARITY = 0.14
MIN_TEXT_SIMILARITY = 0.70

Embed = Callable[[Sequence[str]], np.ndarray]


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    value: float | None
    bound: float | None
    detail: str

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def similarities(embed: Embed, *, post_text: str, current_text: str, candidate: str) -> tuple[float, float]:
    """(cosine with the post, cosine with the current text) of the candidate."""
    vectors = np.asarray(embed([candidate, post_text, current_text]), dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1)
    norms[norms == 0] = 1.0
    unit = vectors / norms[:, None]
    return float(unit[0] @ unit[1]), float(unit[0] @ unit[2])


def proposal_checks(
    *,
    embed: Embed,
    post_text: str,
    current_text: str,
    candidate: str,
    current_urls: Sequence[str],
    candidate_urls: Sequence[str],
    confirmed_urls: Sequence[str],
) -> list[Check]:
    """Every check, passed or not (the audit shows them all). `candidate_urls` are the sources the
    new version would cite; `confirmed_urls` those a person confirmed a passage of."""
    to_post, to_note = similarities(embed, post_text=post_text, current_text=current_text, candidate=candidate)
    checks = [
        Check("about the post", to_post >= MIN_POST_SIMILARITY, round(to_post, 3), MIN_POST_SIMILARITY,
              "similarity of the revision to the post's text (MiniLM cosine)"),
        Check("keeps the note's point", to_note >= MIN_TEXT_SIMILARITY, round(to_note, 3), MIN_TEXT_SIMILARITY,
              "similarity of the revision to the note's current text (MiniLM cosine)"),
    ]  # fmt: skip
    # The sources the current text itself cites are the note's own.
    unconfirmed = sorted(
        {*find_urls(candidate, web_only=True), *candidate_urls}
        - {*confirmed_urls, *find_urls(current_text, web_only=True)}
    )
    sources = "every source was confirmed by a person"
    if unconfirmed:
        sources = "not confirmed by anyone: " + ", ".join(unconfirmed)
    checks.append(Check("cites confirmed sources only", not unconfirmed, None, None, sources))
    dropped = sorted(set(current_urls) - set(candidate_urls))
    kept = "every source of the current version is kept" if not dropped else "drops: " + ", ".join(dropped)
    checks.append(Check("keeps the note's evidence", not dropped, None, None, kept))
    return checks


def failed(checks: Sequence[Check]) -> list[str]:
    """What each failed check found, for the run's reasons."""
    out = []
    for c in checks:
        if c.passed:
            continue
        if c.value is not None and c.bound is not None:
            out.append(f"{c.name}: {c.detail} {c.value:.3f} is under the bound {c.bound:.2f}")
        else:
            out.append(f"{c.name}: {c.detail}")
    return out
