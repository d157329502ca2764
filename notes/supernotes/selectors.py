"""Reads for Supernotes: stuck posts, the eligible notes' rating summaries, the jury pool and μ
from the stored scorer parameters, a post's latest run, the PHM's training rows, and the blind
comparison (which pair a post offers, the pairs a rater may judge, the notes hidden from a rater
while theirs is open, the win rate)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from django.conf import settings
from django.db.models import Count, Min, Prefetch, Q, QuerySet
from django.utils import timezone

from crowdnotes_site.lib.communitynotes.research import real_jury
from crowdnotes_site.lib.communitynotes.supernotes import comparison
from crowdnotes_site.lib.communitynotes.supernotes.jury import estimate_mu
from notes.models import (
    TEXT_WITH,
    Note,
    NoteStatus,
    Participant,
    Post,
    PostQuerySet,
    Rating,
    RatingLevel,
    SupernoteComparison,
    SupernoteRun,
    count_hidden,
    filter_by_text,
)
from notes.supernotes import eligibility
from notes.supernotes.candidates import NoteSummary

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User

_ELIGIBLE = Q(classification=Note.Classification.MISLEADING, status=NoteStatus.NEEDS_MORE_RATINGS) & ~Q(
    origin=Note.Origin.SUPERNOTE
)


@dataclass
class StuckPost:
    post: Post
    notes: Sequence[Note]  # the eligible notes, annotated with n_ratings
    stuck_since: datetime
    latest_run: SupernoteRun | None

    @property
    def stuck_days(self) -> float:
        return (timezone.now() - self.stuck_since).total_seconds() / 86400


def stuck_posts_qs() -> PostQuerySet:
    """Posts with ≥ 2 eligible notes and no note rated Helpful (eligibility.is_stuck in SQL)."""
    return Post.objects.annotate(
        n_eligible=Count("notes", filter=Q(notes__in=Note.objects.filter(_ELIGIBLE)), distinct=True),
        n_helpful=Count("notes", filter=Q(notes__status=NoteStatus.HELPFUL), distinct=True),
    ).filter(n_eligible__gte=eligibility.MIN_NOTES, n_helpful=0)


STUCK_PAGE_SIZE = 20


@dataclass(frozen=True)
class StuckPage:
    items: list[StuckPost]
    page: int
    has_next: bool
    # Stuck imported posts without text left out by the default text filter (0 when shown).
    hidden_without_text: int


def stuck_page(*, page: int = 1, topic: str = "", text: str = TEXT_WITH, size: int = STUCK_PAGE_SIZE) -> StuckPage:
    """One page of stuck posts (longest stuck first) under the health-topic and post-text filters."""
    posts = stuck_posts_qs().filter(topic=topic) if topic else stuck_posts_qs()
    hidden = count_hidden(posts.without_text()) if text == TEXT_WITH else 0
    start = (page - 1) * size
    items = stuck_posts(queryset=filter_by_text(posts, text), offset=start, limit=size + 1)
    return StuckPage(items=items[:size], page=page, has_next=len(items) > size, hidden_without_text=hidden)


def stuck_posts(*, limit: int = 100, offset: int = 0, queryset: QuerySet[Post] | None = None) -> list[StuckPost]:
    """Stuck posts, longest stuck first: by default only posts with text (nobody can merge notes
    on a post they cannot read, and a Supernote run refuses one)."""
    base = queryset if queryset is not None else stuck_posts_qs().with_text()
    posts = list(
        base.prefetch_related(
            Prefetch(
                "notes",
                queryset=Note.objects.filter(_ELIGIBLE).annotate(n_ratings=Count("ratings")).order_by("created_at"),
                to_attr="eligible",
            )
        )
        .annotate(stuck_since=Min("notes__created_at", filter=Q(notes__in=Note.objects.filter(_ELIGIBLE))))
        .order_by("stuck_since", "pk")[offset : offset + limit]
    )
    runs: dict[int, SupernoteRun] = {}
    for run in (
        SupernoteRun.objects.filter(post__in=posts)
        .select_related("requested_by", "proposed_note")
        .order_by("created_at")
    ):
        runs[run.post_id] = run
    # The second eligible note's time: a post is stuck from when it had two notes.
    return [
        StuckPost(p, p.eligible, p.eligible[1].created_at if len(p.eligible) > 1 else p.stuck_since, runs.get(p.pk))  # type: ignore[attr-defined,arg-type]
        for p in posts
    ]


def post_is_stuck(*, post: Post) -> bool:
    states = [
        eligibility.NoteState(c, s, o) for c, s, o in post.notes.values_list("classification", "status", "origin")
    ]
    return eligibility.is_stuck(states)


def note_with_links(note: Note) -> str:
    """A source note as its raters saw it: its text and its evidence links (a note stored with its
    links apart, like the demo's, still gives the Supernote its links to carry)."""
    missing = [u for u in note.evidence_urls or [] if u not in note.text]
    return " ".join([note.text, *missing])


def note_summaries(*, post: Post) -> list[NoteSummary]:
    """The eligible notes of a post with their rating counts, tag counts and helpful ratings per
    factor side, oldest first."""
    notes = list(post.notes.filter(_ELIGIBLE).order_by("created_at", "pk"))
    summaries = {n.pk: NoteSummary(n.pk, note_with_links(n)) for n in notes}
    rows = Rating.objects.filter(note__in=notes).values_list("note_id", "level", "tags", "rater__rater_factor")
    for note_id, level, tags, factor in rows:
        s = summaries[note_id]
        if level == RatingLevel.HELPFUL:
            s.helpful += 1
            if factor is not None:
                if factor < 0:
                    s.helpful_left += 1
                else:
                    s.helpful_right += 1
        elif level == RatingLevel.SOMEWHAT_HELPFUL:
            s.somewhat += 1
        else:
            s.not_helpful += 1
        for tag in tags or []:
            s.tags[tag] = s.tags.get(tag, 0) + 1
    return [summaries[n.pk] for n in notes]


@dataclass
class JuryPool:
    participant_pks: np.ndarray
    rater_intercept: np.ndarray
    rater_factor: np.ndarray
    mu: float
    ratings_per_note: float


def jury_pool() -> JuryPool:
    """Raters with scorer parameters, and μ re-derived from the stored parameters
    (crowdnotes_site.lib.communitynotes.supernotes.jury.estimate_mu) with the ratings-per-note the phase-2 solve uses."""
    people = list(
        Participant.objects.filter(rater_factor__isnull=False, rater_intercept__isnull=False)
        .order_by("pk")
        .values_list("pk", "rater_intercept", "rater_factor")
    )
    rows = np.array(
        list(
            Rating.objects.filter(
                rater__rater_factor__isnull=False, note__intercept__isnull=False, note__factor__isnull=False
            ).values_list("level", "rater__rater_intercept", "rater__rater_factor", "note__intercept", "note__factor")
        ),
        dtype=object,
    )
    mu, per_note = 0.0, 1.0
    if len(rows):
        value = np.array([{"HELPFUL": 1.0, "SOMEWHAT_HELPFUL": 0.5}.get(v, 0.0) for v in rows[:, 0]])
        num = rows[:, 1:].astype(np.float64)
        mu = estimate_mu(value, num[:, 0], num[:, 1], num[:, 2], num[:, 3])
        n_notes = Note.objects.filter(intercept__isnull=False).count()
        per_note = len(rows) / max(n_notes, 1)
    return JuryPool(
        np.array([p[0] for p in people], dtype=np.int64),
        np.array([p[1] for p in people], dtype=np.float64),
        np.array([p[2] for p in people], dtype=np.float64),
        mu,
        per_note,
    )


def latest_run(*, post: Post) -> SupernoteRun | None:
    return post.supernote_runs.select_related("proposed_note", "best_existing_note").first()


def run_detail(*, run_id: int) -> SupernoteRun:
    return SupernoteRun.objects.select_related("post", "proposed_note", "best_existing_note").get(pk=run_id)


def source_notes(*, run: SupernoteRun) -> list[Note]:
    """The notes a run merged, with their authors (credited on the proposal)."""
    by_pk = {n.pk: n for n in Note.objects.filter(pk__in=run.source_note_ids).select_related("author__user")}
    return [by_pk[pk] for pk in run.source_note_ids if pk in by_pk]


@dataclass
class RatingRows:
    """Every rating whose rater has scorer parameters, with its note's and post's texts."""

    note_pks: list[int]
    note_texts: list[str]
    note_classifications: list[str]
    note_links: list[list[str]]  # links stored apart from the text
    post_texts: list[str]
    note: np.ndarray
    rater_intercept: np.ndarray
    rater_factor: np.ndarray
    label: np.ndarray
    sources: dict[str, int]


def phm_training_rows(*, max_ratings: int | None = None) -> RatingRows:
    qs = Rating.objects.filter(rater__rater_factor__isnull=False, rater__rater_intercept__isnull=False).order_by("pk")
    rows = list(
        qs.values_list("note_id", "level", "rater__rater_intercept", "rater__rater_factor", "note__is_demo",
                       "note__external_id")[: max_ratings or None]
    )  # fmt: skip
    index: dict[int, int] = {}
    for r in rows:
        index.setdefault(r[0], len(index))
    texts = dict(Note.objects.filter(pk__in=index).values_list("pk", "text"))
    kinds = dict(Note.objects.filter(pk__in=index).values_list("pk", "classification"))
    links = dict(Note.objects.filter(pk__in=index).values_list("pk", "evidence_urls"))
    posts = dict(Note.objects.filter(pk__in=index).values_list("pk", "post__text"))
    sources: dict[str, int] = defaultdict(int)
    for r in rows:
        sources["demo" if r[4] else ("imported" if r[5] else "app")] += 1
    label_of = {"HELPFUL": 0, "SOMEWHAT_HELPFUL": 1, "NOT_HELPFUL": 2}
    pks = list(index)
    return RatingRows(
        note_pks=pks,
        note_texts=[texts[pk] for pk in pks],
        note_classifications=[kinds[pk] for pk in pks],
        note_links=[list(links[pk] or []) for pk in pks],
        post_texts=[posts[pk] or "" for pk in pks],
        note=np.array([index[r[0]] for r in rows], dtype=np.int64),
        rater_intercept=np.array([r[2] for r in rows], dtype=np.float64),
        rater_factor=np.array([r[3] for r in rows], dtype=np.float64),
        label=np.array([label_of[r[1]] for r in rows], dtype=np.int64),
        sources=dict(sources),
    )


# --- Blind comparison ------------------------------------------------------------------------


@dataclass(frozen=True)
class ComparisonPair:
    """A post's proposed Supernote (the newest) and its best existing note: the highest scorer
    intercept, or the most-rated note when no note of the post is scored yet."""

    post: Post
    supernote: Note
    other: Note

    def involves(self, participant: Participant) -> bool:
        return participant.pk in (self.supernote.author_id, self.other.author_id)


def _pair_of(post: Post, notes: Sequence[Note]) -> ComparisonPair | None:
    supernotes = [n for n in notes if n.origin == Note.Origin.SUPERNOTE]
    others = [n for n in notes if n.origin != Note.Origin.SUPERNOTE]
    if not supernotes or not others:
        return None
    supernote = max(supernotes, key=lambda n: (n.created_at, n.pk))
    other = max(
        others,
        key=lambda n: (n.intercept is not None, n.intercept if n.intercept is not None else 0.0, n.num_ratings, -n.pk),
    )
    return ComparisonPair(post, supernote, other)


def comparison_pair(*, post: Post) -> ComparisonPair | None:
    return _pair_of(post, list(post.notes.all()))


def comparisons_available(*, participant: Participant, limit: int = 10) -> list[ComparisonPair]:
    """Pairs this rater may judge and has not answered: posts with a proposed Supernote and another
    note, leaving out pairs with the rater's own note (three queries whatever the number of rows)."""
    # The newest posts with a Supernote, read backwards from a partial index of Note.Meta (neither
    # every note nor every post is scanned).
    newest = (
        Note.objects.filter(origin=Note.Origin.SUPERNOTE).order_by("-post_id").values("post_id").distinct()[: limit * 3]
    )
    posts = (
        Post.objects.filter(pk__in=newest)
        .order_by("-pk")
        .prefetch_related(Prefetch("notes", queryset=Note.objects.order_by("pk")))
    )
    answered = set(
        SupernoteComparison.objects.filter(rater=participant, answered_at__isnull=False).values_list(
            "supernote_id", "other_note_id"
        )
    )
    found: list[ComparisonPair] = []
    for post in posts:
        pair = _pair_of(post, list(post.notes.all()))
        if pair and not pair.involves(participant) and (pair.supernote.pk, pair.other.pk) not in answered:
            found.append(pair)
    return found[:limit]


@dataclass(frozen=True)
class ComparisonSides:
    """The two notes as the rater sees them: Note A and Note B, in the stored order."""

    note_a: Note
    note_b: Note


def open_comparisons(*, user: User | AnonymousUser) -> dict[int, int]:
    """Each note hidden from `user`, with the id of the blind comparison that hides it: both notes of
    every comparison they were assigned and have not answered yet. Any page showing either note (its
    rating count, date, id, origin or place in a list beside its text), or one of them without the
    other, would tell the rater which is the Supernote; until they answer, only the comparison page
    shows the two texts. Empty for anyone without an open comparison (no query for anonymous visitors)."""
    if not user.is_authenticated:
        return {}
    rows = SupernoteComparison.objects.filter(rater__user=user, answered_at__isnull=True).values_list(
        "pk", "supernote_id", "other_note_id"
    )
    return {note_id: pk for pk, *pair in rows for note_id in pair}


def hidden_note_ids(*, user: User | AnonymousUser) -> frozenset[int]:
    """The notes every page that shows notes leaves out for `user` (`open_comparisons`)."""
    return frozenset(open_comparisons(user=user))


def comparison_sides(*, item: SupernoteComparison) -> ComparisonSides:
    if item.supernote_first:
        return ComparisonSides(item.supernote, item.other_note)
    return ComparisonSides(item.other_note, item.supernote)


def comparison_results() -> comparison.WinRate:
    """Every answered comparison: the Supernote's win rate (Wilson 95 %) and per-statement means."""
    rows = SupernoteComparison.objects.filter(answered_at__isnull=False).values_list(
        "supernote_preferred", "supernote_scores", "other_scores"
    )
    return comparison.summarize((bool(p), s or {}, o or {}) for p, s, o in rows)


# --- The jury's evaluation on the public sample (stored offline by `evaluate_jury_sample --store`) ---


@dataclass
class JuryEvaluation:
    """The stored evaluation, laid out for the page: nothing here is computed from the data, only
    read from the file the command wrote."""

    measured_at: str
    command: str
    shipped: bool  # the copy measured by the developers and kept with the code, not one measured here
    commit: str
    summary: dict[str, Any]
    rule_labels: list[str]
    rows: list[dict[str, Any]]
    differences: list[dict[str, Any]]
    ablation_truths: list[str]
    ablation: list[dict[str, Any]]


# The evaluation measured when the jury's inputs last changed, kept with the code: shown (and said to
# be that) until `evaluate_jury_sample --store` writes one on this installation.
SHIPPED_JURY_EVALUATION = Path(__file__).resolve().parent / "measured" / "jury-evaluation.json"


def jury_evaluation() -> JuryEvaluation | None:
    """The table of `settings.JURY_EVALUATION_FILE`, else the one shipped with the code; None when
    neither is there (or a file is not one)."""
    path = Path(settings.JURY_EVALUATION_FILE)
    shipped = not path.exists()
    path = SHIPPED_JURY_EVALUATION if shipped else path
    try:
        stored = json.loads(path.read_text())
        summary = stored["summary"]
        rules = list(summary["rules"])
        rows = [
            {**t, "rule_cells": [t["rules"][r] for r in rules]} for t in summary["truths"]
        ]  # fmt: skip
        differences = [{"truth": t["truth"], **t["paired_difference"]} for t in summary["truths"]]
        ablation = stored.get("ablation") or []
        truths = list(ablation[0]["p_at_1"]) if ablation else []
        ablation_rows = [{**a, "cells": [a["p_at_1"][t] for t in truths]} for a in ablation]
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None
    return JuryEvaluation(
        measured_at=str(stored.get("measured_at", "")), command=str(stored.get("command", "")), shipped=shipped,
        commit=str(stored.get("commit", "")), summary=summary,
        rule_labels=[summary["rules"][r] for r in rules], rows=rows, differences=differences,
        ablation_truths=truths, ablation=ablation_rows,
    )  # fmt: skip


# --- The jury on real posts (stored offline by `evaluate_jury --real --store`) -----------------------


def real_jury_evaluation() -> dict[str, Any] | None:
    """The stored table of the jury on the real folder's posts (`JURY_REAL_DIR/evaluation.json`), laid
    out for the page with each row's rule cells in the rules' order; None when none is stored (or the
    file is not one)."""
    path = Path(settings.JURY_REAL_DIR) / real_jury.EVALUATION_FILE
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        rules = list(stored["rules"])
        rows = [{**row, "rule_cells": [row["rules"][r] for r in rules]} for row in stored["rows"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return {**stored, "rule_labels": [stored["rules"][r] for r in rules], "rows": rows}
