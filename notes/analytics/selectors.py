"""Reads for the analytics pages: delays, spikes, topics, judge funnel over time."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Count, Max, Min, Q, QuerySet
from django.db.models.functions import Coalesce, TruncDate
from django.utils import timezone

from crowdnotes_site.lib.categories import CATEGORY_LABELS, category_by_rules
from crowdnotes_site.lib.communitynotes.research import delays, spikes
from crowdnotes_site.lib.llm.pipeline import STAGES
from crowdnotes_site.lib.memo import Memo
from evidence.models import EvidenceSource, Snippet
from judging.models import JudgeDecision
from judging.selectors import Funnel, funnel_of, judged_notes
from notes.models import ImportedNoteHistory, Note, NoteStatus, NoteStatusChange, Post, ScoringRun, Topic

VERDICTS = (NoteStatus.HELPFUL, NoteStatus.NOT_HELPFUL)


@dataclass(frozen=True)
class AnalyticsFilters:
    topic: str = ""
    origin: str = ""
    date_from: dt.date | None = None  # on the note's creation date
    date_to: dt.date | None = None
    demo: str = ""  # "": all, "real": no demo content, "demo": demo only


def notes_filtered(f: AnalyticsFilters) -> QuerySet[Note]:
    qs = Note.objects.all()
    if f.topic:
        qs = qs.filter(post__topic=f.topic)
    if f.origin:
        qs = qs.filter(origin=f.origin)
    if f.date_from:
        qs = qs.filter(created_at__date__gte=f.date_from)
    if f.date_to:
        qs = qs.filter(created_at__date__lte=f.date_to)
    if f.demo == "real":
        qs = qs.filter(is_demo=False, post__is_demo=False)
    elif f.demo == "demo":
        qs = qs.filter(Q(is_demo=True) | Q(post__is_demo=True))
    return qs


@dataclass(frozen=True)
class DelaySummary:
    report: delays.DelayReport
    n_notes: int
    n_posts: int
    n_scored: int  # notes the never-left-NMR share is over
    n_imported: int = 0  # imported notes, left out of note -> first verdict (see delay_summary)
    computed_at: dt.datetime | None = None


# The delay figures are computed in the database: on PostgreSQL a few aggregate queries, nothing per
# note comes back to Python (a database may hold the whole public download: millions of notes and
# status-history rows, too many to read into Python per request). percentile_cont is the same linear
# interpolation as numpy's default, so the figures equal crowdnotes_site.lib.communitynotes.research.delays.percentiles
# on the same values (tests/notes/analytics/test_analytics_sql.py, run on both databases). A summary is kept
# per web worker, keyed by the filters and by the newest note, status change, imported history row and
# finished scoring run (one query of index lookups); what that key does not see (an edited post time)
# shows within DELAY_SUMMARY_MAX_AGE_S, and the page says when the figures were computed.
DELAY_SUMMARY_MAX_AGE_S = 300

_PERCENTILES_SQL = (
    "SELECT percentile_cont(%s::float8[]) WITHIN GROUP (ORDER BY h) FILTER (WHERE h >= 0), "
    "COUNT(h) FILTER (WHERE h >= 0), COUNT(h) FILTER (WHERE h < 0), COUNT(*)"
)


def _sql_of(qs: QuerySet[Any]) -> tuple[str, tuple[Any, ...]]:
    sql, params = qs.query.sql_with_params()
    return sql, tuple(params)


def _hours_percentiles(
    later: str, earlier: str, inner: QuerySet[Any], where: str = ""
) -> tuple[delays.Percentiles, int]:
    """delays.percentiles over the hours from column `earlier` to column `later` of `inner` (NULL:
    a row without a delay), and the number of rows of `inner` (past `where`). The one home of the
    analytics pages' database-specific SQL. On SQLite (the demo's embedded database: one machine's
    data) the hours come back to Python and numpy computes the same definition; julianday reads
    the stored times to the millisecond."""
    sql, params = _sql_of(inner)
    if connection.vendor == "sqlite":
        hours_of = f"SELECT (julianday({later}) - julianday({earlier})) * 24 FROM ({sql}) AS r {where}"  # noqa: S608  (fixed SQL around the ORM's own)
        with connection.cursor() as cursor:
            cursor.execute(hours_of, params)
            rows = cursor.fetchall()
        return delays.percentiles(h for (h,) in rows if h is not None), len(rows)
    hours = f"EXTRACT(EPOCH FROM ({later} - {earlier})) / 3600"
    query = f"{_PERCENTILES_SQL} FROM (SELECT ({hours})::float8 AS h FROM ({sql}) AS r {where}) AS d"  # noqa: S608  (fixed SQL around the ORM's own)
    with connection.cursor() as cursor:
        cursor.execute(query, (list(p / 100 for p in delays.PERCENTILES), *params))
        values, n, negative, total = cursor.fetchone()
    if not n:
        return delays.Percentiles(None, None, None, None, 0, negative), total
    p25, p50, p75, p90 = (float(v) for v in values)
    return delays.Percentiles(p25, p50, p75, p90, n, negative), total


def _first_verdict_report(
    inner: QuerySet[Any],
    note_time: str,
    verdict_time: str,
    where: str = "",
    post_to_first_note: delays.Percentiles | None = None,
) -> delays.DelayReport:
    """delays.delay_report over rows of `inner` with a note time and a first-verdict time (NULL:
    never left Needs More Ratings), beside `post_to_first_note` (none: no posts)."""
    verdict, total = _hours_percentiles(verdict_time, note_time, inner, where)
    never = total - verdict.n - verdict.n_negative
    return delays.DelayReport(
        post_to_first_note_hours=post_to_first_note or delays.percentiles([]),
        note_to_first_verdict_hours=verdict,
        never_left_nmr_share=never / total if total else None,
        n_notes_status=total,
    )


def delays_version() -> tuple[Any, ...]:
    """The newest note, status change and imported history row, and the last finished scoring run,
    in one query (index lookups)."""
    newest = [(Note, "id"), (NoteStatusChange, "id"), (ImportedNoteHistory, "id"), (ScoringRun, "finished_at")]
    # The table and column names come from the models and this list, never from input.
    cols = [f"(SELECT MAX({c}) FROM {connection.ops.quote_name(m._meta.db_table)})" for m, c in newest]  # noqa: S608
    sql = "SELECT " + ", ".join(cols)
    with connection.cursor() as cursor:
        cursor.execute(sql)
        row = cursor.fetchone()
    return tuple(row) if row else ()


_DELAY_SUMMARIES: Memo[DelaySummary] = Memo(size=32, max_age_s=DELAY_SUMMARY_MAX_AGE_S)


def delay_summary(f: AnalyticsFilters) -> DelaySummary:
    """The delays of the notes matching `f`, with the definitions of crowdnotes_site.lib.communitynotes.research.delays:
    a post's time is its posted_at (imported posts: from the tweet id), else when it was
    flagged; a note's first verdict is its first Helpful / Not Helpful status change. The
    never-left-NMR share is over notes with a known status history: scored by the app's
    scorer, or with a recorded verdict (imported status history)."""
    return _DELAY_SUMMARIES.get_or_build((f, delays_version()), lambda: _delay_summary(f)).value


def _delay_summary(f: AnalyticsFilters) -> DelaySummary:
    notes = notes_filtered(f)
    per_post = notes.values("post_id").annotate(
        first_note=Min("created_at"), post_time=Coalesce(Min("post__posted_at"), Min("post__created_at"))
    )
    post_hours, n_posts = _hours_percentiles("first_note", "post_time", per_post)
    # A note imported from the public data gets its status here when this app scores its imported
    # ratings, years after it earned it: that time is not a verdict delay. Such notes are left out of
    # note -> first verdict (the imported status history gives their real delays).
    imported = Q(external_id__isnull=False, is_demo=False)
    counts = notes.aggregate(n=Count("pk"), imported=Count("pk", filter=imported))  # one scan for both
    rows = (
        notes.exclude(imported)
        .annotate(first_verdict=Min("status_changes__changed_at", filter=Q(status_changes__status__in=VERDICTS)))
        .values("created_at", "first_verdict", "scored_at")
    )
    where = "WHERE scored_at IS NOT NULL OR first_verdict IS NOT NULL"
    report = _first_verdict_report(rows, "created_at", "first_verdict", where, post_to_first_note=post_hours)
    return DelaySummary(
        report,
        n_notes=counts["n"],
        n_posts=n_posts,
        n_scored=report.n_notes_status,
        n_imported=counts["imported"],
        computed_at=timezone.now(),
    )


def note_data_span(f: AnalyticsFilters) -> tuple[dt.date, dt.date] | None:
    """The first and last day a note matching the filters but any dates was written (None: no date
    filter, or no such note): what a date range without notes links to."""
    if not (f.date_from or f.date_to):
        return None
    found = notes_filtered(dataclasses.replace(f, date_from=None, date_to=None)).aggregate(
        first=Min("created_at"), last=Max("created_at")
    )
    if found["first"] is None or found["last"] is None:
        return None
    return found["first"].date(), found["last"].date()


@dataclass(frozen=True)
class ImportedHistorySummary:
    """Note -> first verdict over the imported public status history (ImportedNoteHistory)."""

    report: delays.DelayReport | None  # None: the filters ask for something the file cannot say
    n_rows: int  # rows stored in all
    first: dt.datetime | None  # creation time range of the rows counted
    last: dt.datetime | None
    sources: list[str]
    why_not: str = ""


_IMPORTED_HISTORY: Memo[ImportedHistorySummary] = Memo(size=32, max_age_s=DELAY_SUMMARY_MAX_AGE_S)


def imported_history_summary(f: AnalyticsFilters) -> ImportedHistorySummary:
    """`_imported_history_summary`, kept per web worker as the delays are (2.7 M rows for the
    whole public download)."""
    return _IMPORTED_HISTORY.get_or_build((f, delays_version()), lambda: _imported_history_summary(f)).value


def _imported_history_summary(f: AnalyticsFilters) -> ImportedHistorySummary:
    """The status-history file's notes have no post, topic or origin here, and are real public
    data: the date filters apply (note creation); a topic, origin or demo-only filter leaves them out."""
    qs = ImportedNoteHistory.objects.all()
    n_rows = qs.count()
    sources = sorted(set(qs.values_list("source_file", flat=True).distinct()))
    if f.topic or f.origin or f.demo == "demo":
        why = "the imported status history has no topic or note origin and is not demo content"
        return ImportedHistorySummary(None, n_rows, None, None, sources, why_not=why)
    if f.date_from:
        qs = qs.filter(created_at__date__gte=f.date_from)
    if f.date_to:
        qs = qs.filter(created_at__date__lte=f.date_to)
    report = _first_verdict_report(qs.values("created_at", "first_verdict_at"), "created_at", "first_verdict_at")
    span = qs.aggregate(first=Min("created_at"), last=Max("created_at"))
    return ImportedHistorySummary(report, n_rows, span["first"], span["last"], sources)


# --- Spikes ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SpikeReport:
    unit: str
    series: spikes.DailySeries
    spikes: list[spikes.Spike]
    n_items: int
    n_texts: int  # items whose text the trending terms could read
    shown_from: dt.date | None = None  # set when only SHOWN_DAYS days are shown
    shown_to: dt.date | None = None
    # The first and last day of the data under the filter (None: no data in the range).
    data_from: dt.date | None = None
    data_to: dt.date | None = None
    n_thresholds: int = 0  # days shown with enough history for a threshold
    rule: str = ""  # the history and size conditions, in words (spikes.rule_text)
    computed_at: dt.datetime | None = None


SHOWN_DAYS = 180


def _spike_items(f: AnalyticsFilters, unit: str) -> QuerySet[Any]:
    """The notes (by creation day) or flagged posts (by the post's time: posted_at, else when it
    was flagged) matching `f`, each with its UTC `day`, within the date filter. The plot's axis
    follows the date filter, whatever the unit (posts are dated by their own time, notes by
    creation: a post of 2014 with a 2021 note stays out of a 2021 range)."""
    notes = notes_filtered(f)
    items: QuerySet[Any]
    if unit == "posts":
        items = Post.objects.filter(pk__in=notes.values("post_id")).annotate(
            day=TruncDate(Coalesce("posted_at", "created_at"), tzinfo=dt.UTC)
        )
    else:
        items = notes.annotate(day=TruncDate("created_at", tzinfo=dt.UTC))
    if f.date_from:
        items = items.filter(day__gte=f.date_from)
    if f.date_to:
        items = items.filter(day__lte=f.date_to)
    return items


def _texts_by_day(f: AnalyticsFilters, unit: str, spans: list[tuple[dt.date, dt.date]]) -> dict[dt.date, list[str]]:
    """The texts the trending terms read, only on the days of `spans`: note texts; a post's text,
    or its notes' texts when the post was imported without text."""
    texts: dict[dt.date, list[str]] = defaultdict(list)
    if not spans:
        return texts
    on_days = Q()
    for first, last in spans:
        on_days |= Q(day__range=(first, last))
    items = _spike_items(f, unit).filter(on_days)
    if unit == "posts":
        rows = list(items.values_list("pk", "day", "text", "text_available"))
        note_texts: dict[int, list[str]] = defaultdict(list)
        without = [pk for pk, _, _, available in rows if not available]
        for post_id, text in notes_filtered(f).filter(post_id__in=without).values_list("post_id", "text"):
            note_texts[post_id].append(text)
        pairs = [(day, text if available else " ".join(note_texts.get(pk, []))) for pk, day, text, available in rows]
    else:
        pairs = list(items.values_list("day", "text"))
    for day, text in pairs:
        if text:
            texts[day].append(text)
    return texts


_SPIKE_REPORTS: Memo[SpikeReport] = Memo(size=32, max_age_s=DELAY_SUMMARY_MAX_AGE_S)


def spike_report(
    f: AnalyticsFilters, *, unit: str = "notes", window: int = spikes.WINDOW_DAYS, k: float = spikes.K_SIGMA
) -> SpikeReport:
    """`_spike_report`, kept per web worker as the delays are (keyed by the same versions, the
    same age bound): over the whole public download one report reads 2.5 M notes."""
    key = (f, unit, window, k, delays_version())
    return _SPIKE_REPORTS.get_or_build(key, lambda: _spike_report(f, unit=unit, window=window, k=k)).value


def _spike_report(f: AnalyticsFilters, *, unit: str, window: int, k: float) -> SpikeReport:
    """Daily counts of notes (by creation day) or of flagged posts (by the post's time:
    posted_at, else when it was flagged) among those matching `f`, with spikes and their
    trending terms (note texts; a post's text, or its notes' texts when the post was
    imported without text). The counts are one GROUP BY in PostgreSQL; texts are read only
    for the days the shown spikes' terms compare (over the whole public download, every note's
    text is too much to read per request)."""
    items = _spike_items(f, unit)
    by_day = dict(items.order_by().values_list("day").annotate(n=Count("pk")).values_list("day", "n"))
    days, counts = spikes.fill_days(by_day)
    series, found = spikes.detect(days, counts, window=window, k=k)
    shown_from = shown_to = None
    data_from, data_to = (series.days[0], series.days[-1]) if series.days else (None, None)
    if not (f.date_from or f.date_to) and len(series.days) > SHOWN_DAYS:
        # Without a date range, open on SHOWN_DAYS days with data to read: ending a month after the
        # latest spike (the last SHOWN_DAYS of the history may hold a few recent notes only).
        end = len(series.days)
        if found and all(sp.index < end - SHOWN_DAYS for sp in found):
            end = min(end, found[-1].index + 31)
        series = spikes.DailySeries(series.days[:end], series.counts[:end], series.rolling_mean[:end],
                                    series.threshold[:end])  # fmt: skip
        found = [sp for sp in found if sp.index < end]
        series, found = spikes.last_days(series, found, SHOWN_DAYS)
        shown_from, shown_to = series.days[0], series.days[-1]
    texts = _texts_by_day(f, unit, [spikes.terms_span(sp.day, window=window) for sp in found])
    found = [dataclasses.replace(sp, terms=spikes.trending_terms(texts, sp.day, window=window)) for sp in found]
    return SpikeReport(
        unit,
        series,
        found,
        n_items=sum(by_day.values()),
        n_texts=_with_text(f, unit, items),
        shown_from=shown_from,
        shown_to=shown_to,
        data_from=data_from,
        data_to=data_to,
        n_thresholds=sum(t is not None for t in series.threshold),
        rule=spikes.rule_text(unit),
        computed_at=timezone.now(),
    )


def _with_text(f: AnalyticsFilters, unit: str, items: QuerySet[Any]) -> int:
    """Items whose text the trending terms could read (a post without text: through a note)."""
    if unit != "posts":
        return items.exclude(text="").count()
    # Two counts, not one OR: PostgreSQL plans "a OR pk IN (subquery)" as a subquery per row.
    readable = items.filter(text_available=True).exclude(text="").count()
    with_notes = notes_filtered(f).exclude(text="").values("post_id")
    return readable + items.filter(text_available=False, pk__in=with_notes).count()


def spike_data_span(f: AnalyticsFilters, *, unit: str = "notes") -> tuple[dt.date, dt.date] | None:
    """The first and last day with data under the filters but any dates (None: no data at all):
    what a date range without data links to."""
    if not (f.date_from or f.date_to):
        return None
    found = _spike_items(dataclasses.replace(f, date_from=None, date_to=None), unit).aggregate(
        first=Min("day"), last=Max("day")
    )
    if found["first"] is None or found["last"] is None:
        return None
    return found["first"], found["last"]


# --- Posts in a spike (the contributors' queue) --------------------------------------------

HEALTH_TOPICS = [value for value in Topic.values if value != Topic.NOT_HEALTH]


@dataclass(frozen=True)
class SpikeQueue:
    """Flagged health posts around spike days that still lack a Helpful note, newest spike first."""

    groups: list[tuple[spikes.Spike, list[Post]]]
    n_health_posts: int  # posts with a health topic: the daily series the spikes are found in
    n_unclassified: int  # posts with text without a topic yet: not counted
    window: int
    k: float
    n_no_text: int = 0  # posts imported without their text: never classified, not counted
    rule: str = spikes.rule_text("health posts")  # the history and size conditions, in words


def _health_post_spikes(
    *, window: int, k: float
) -> tuple[list[tuple[int, dt.datetime]], list[spikes.Spike], dict[int, dt.date]]:
    """The spikes in the daily count of flagged health posts (posted_at, else when flagged),
    newest first, and for each post in a spike's 3-day window (day-1..day+1) that spike's day (a
    post near two spikes belongs to the newer). One query."""
    health = Post.objects.filter(topic__in=HEALTH_TOPICS)
    rows = list(health.annotate(when=Coalesce("posted_at", "created_at")).values_list("pk", "when"))
    days, counts = spikes.daily_counts(w.date() for _, w in rows)
    _, found = spikes.detect(days, counts, window=window, k=k)
    found.sort(key=lambda sp: sp.day, reverse=True)
    window_of: dict[int, dt.date] = {}
    for sp in found:
        span = {sp.day + dt.timedelta(days=d) for d in (-1, 0, 1)}
        for pk, w in rows:
            if w.date() in span:
                window_of.setdefault(pk, sp.day)
    return rows, found, window_of


# A spike is current while its day is one of the last CURRENT_SPIKE_DAYS days (today included).
CURRENT_SPIKE_DAYS = 3


def posts_in_current_spike(*, today: dt.date | None = None) -> dict[int, spikes.Spike]:
    """Posts in the 3-day window of a current spike of flagged health posts (the rule of "Posts in
    a spike"), each with its spike."""
    today = today or timezone.now().date()
    _, found, window_of = _health_post_spikes(window=spikes.WINDOW_DAYS, k=spikes.K_SIGMA)
    current = {sp.day: sp for sp in found if 0 <= (today - sp.day).days < CURRENT_SPIKE_DAYS}
    return {pk: current[day] for pk, day in window_of.items() if day in current}


def spike_queue(*, limit: int = 60, window: int = spikes.WINDOW_DAYS, k: float = spikes.K_SIGMA) -> SpikeQueue:
    """Spikes in the daily count of flagged health posts (posted_at, else when flagged), with
    the posts of each spike's 3-day window (day-1..day+1) that have no Helpful note yet. Three
    queries, whatever the number of posts."""
    when = Coalesce("posted_at", "created_at")
    rows, found, window_of = _health_post_spikes(window=window, k=k)
    n_unclassified = Post.objects.filter(topic="", text_available=True).count()
    n_no_text = Post.objects.filter(topic="", text_available=False).count()
    posts = (
        Post.objects.filter(pk__in=list(window_of))
        .exclude(notes__status=NoteStatus.HELPFUL)
        .annotate(n_notes=Count("notes"), when=when)
        .order_by("n_notes", "-when")
    )
    by_spike: dict[dt.date, list[Post]] = defaultdict(list)
    shown = 0
    for post in posts:
        if shown >= limit:
            break
        by_spike[window_of[post.pk]].append(post)
        shown += 1
    groups = [(sp, by_spike[sp.day]) for sp in found if by_spike.get(sp.day)]
    return SpikeQueue(
        groups, n_health_posts=len(rows), n_unclassified=n_unclassified, window=window, k=k, n_no_text=n_no_text
    )


# --- Topics ------------------------------------------------------------------------------


NO_TEXT = "no-text"


def topic_counts(f: AnalyticsFilters) -> list[tuple[str, str, int]]:
    """(topic value, label, posts) for the posts of the matching notes; "" = a post with text not
    classified yet; NO_TEXT = imported without its text (never classified: nothing to read)."""
    posts = Post.objects.filter(pk__in=notes_filtered(f).values("post_id"))
    counts: dict[str, int] = dict(
        posts.filter(text_available=True).order_by().values("topic").annotate(n=Count("pk")).values_list("topic", "n")
    )
    out = [(value, str(label), counts.get(value, 0)) for value, label in Topic.choices]
    out.append(("", "Not classified yet", counts.get("", 0)))
    out.append((NO_TEXT, "Imported without text (cannot be classified)", posts.filter(text_available=False).count()))
    return out


# --- Judge funnel over time, evidence source categories ------------------------------------


@dataclass(frozen=True)
class FunnelRow:
    month: str
    origin: str
    origin_label: str
    funnel: Funnel
    n_excluded: int


def funnel_over_time(f: AnalyticsFilters) -> tuple[list[FunnelRow], int]:
    """The judge funnel per month of note creation and note origin, over each note's latest
    judged version judged with real inputs; and how many judged notes were excluded."""
    notes = notes_filtered(f)
    per_note, excluded = judged_notes(JudgeDecision.objects.filter(note__in=notes))
    info = dict(
        (pk, (created.strftime("%Y-%m"), origin))
        for pk, created, origin in notes.filter(pk__in=list(per_note)).values_list("pk", "created_at", "origin")
    )
    groups: dict[tuple[str, str], list[dict[str, str]]] = defaultdict(list)
    for note_id, verdicts in per_note.items():
        groups[info[note_id]].append(verdicts)
    labels = dict(Note.Origin.choices)
    rows = [
        FunnelRow(month, origin, str(labels.get(origin, origin)), funnel_of(v), 0)
        for (month, origin), v in sorted(groups.items())
    ]
    return rows, excluded


@dataclass(frozen=True)
class AgreementRow:
    month: str
    origin: str
    origin_label: str
    n_notes: int  # crowd-Helpful or crowd-Not-Helpful notes judged with real inputs
    n_agree: int  # judged helpful (all stages yes) exactly when the crowd said Helpful

    @property
    def share(self) -> float | None:
        return self.n_agree / self.n_notes if self.n_notes else None


def agreement_over_time(f: AnalyticsFilters) -> tuple[list[AgreementRow], int]:
    """Judge-crowd agreement per month of note creation and note origin: among matching notes
    with a crowd verdict (Helpful or Not Helpful) whose latest version was judged with real
    inputs, how many the judges call helpful exactly when the crowd did; and how many judged
    notes with a crowd verdict were excluded (no real inputs)."""
    notes = notes_filtered(f).filter(status__in=[NoteStatus.HELPFUL, NoteStatus.NOT_HELPFUL])
    per_note, excluded = judged_notes(JudgeDecision.objects.filter(note__in=notes))
    info = {
        pk: (created.strftime("%Y-%m"), origin, status == NoteStatus.HELPFUL)
        for pk, created, origin, status in notes.filter(pk__in=list(per_note)).values_list(
            "pk", "created_at", "origin", "status"
        )
    }
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for note_id, verdicts in per_note.items():
        month, origin, crowd_helpful = info[note_id]
        judged_helpful = all(verdicts.get(stage) == "yes" for stage in STAGES)
        cell = counts[(month, origin)]
        cell[0] += 1
        cell[1] += judged_helpful == crowd_helpful
    labels = dict(Note.Origin.choices)
    rows = [
        AgreementRow(month, origin, str(labels.get(origin, origin)), n, agree)
        for (month, origin), (n, agree) in sorted(counts.items())
    ]
    return rows, excluded


@dataclass(frozen=True)
class SourceCategories:
    categories: list[tuple[str, str]]  # (value, label)
    human: list[int]
    machine: list[int]
    n_by_rules: int  # URLs without a stored source, categorised by the domain rules


def _indexed_copies(urls: set[str]) -> dict[str, tuple[str, str]]:
    """Served address of an indexed copy -> (its original URL, the original's category): a page of
    the local index read from where it is served (the demo's 127.0.0.1 pages) is counted as the
    document it is a copy of (the manifest's `url`), not as its loopback host."""
    if not urls:
        return {}
    rows = EvidenceSource.objects.filter(copy_url__in=urls, indexed_at__isnull=False).values_list(
        "copy_url", "url", "category"
    )
    return {copy: (url, category or category_by_rules(url).category) for copy, url, category in rows}


def source_categories(f: AnalyticsFilters) -> SourceCategories:
    """Evidence sources of the matching notes by source category: chosen by people (the
    contributor's URLs, imported notes' URLs) or proposed by the automation (Snippet.proposed_by).
    A locally served copy of an indexed document counts as its original URL."""
    notes = notes_filtered(f)
    human: dict[str, int] = defaultdict(int)
    machine: dict[str, int] = defaultdict(int)
    with_snippets: set[int] = set()
    by_rules = 0
    snippet_rows = list(
        Snippet.objects.filter(note__in=notes)
        .exclude(confirmation=Snippet.Confirmation.REJECTED)
        .values_list("note_id", "url", "source__category", "proposed_by_id")
    )
    copies = _indexed_copies({url for _, url, _, _ in snippet_rows})
    for note_id, url, category, proposed in snippet_rows:
        with_snippets.add(note_id)
        if url in copies:
            category = copies[url][1]
        if not category:
            category, by_rules = category_by_rules(url).category, by_rules + 1
        (machine if proposed else human)[category] += 1
    for urls in notes.exclude(pk__in=with_snippets).values_list("evidence_urls", flat=True):
        for url in urls or []:
            human[category_by_rules(str(url)).category] += 1
            by_rules += 1
    cats = list(CATEGORY_LABELS.items())
    return SourceCategories(cats, [human[c] for c, _ in cats], [machine[c] for c, _ in cats], by_rules)
