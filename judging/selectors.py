"""Reads for the judges and the audit pages."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import connection
from django.db.models import F, Q, QuerySet, Sum
from django.utils import timezone

from crowdnotes_site.lib import status as note_status
from crowdnotes_site.lib.llm.pipeline import (
    NOT_REACHED,
    STAGES,
    JudgeInput,
    gated,
    helpful_of,
    stopped_by,
)
from crowdnotes_site.lib.llm.pipeline import content_hash as judge_content_hash
from crowdnotes_site.lib.llm.steps.common import Evidence
from crowdnotes_site.lib.memo import Memo
from crowdnotes_site.models import LlmUsage
from crowdnotes_site.queue import outbox_key, outbox_waiting
from evidence.models import Snippet
from judging.benchmark.results import latest_table
from judging.benchmark.table import MODE_TEXT
from judging.models import JudgeDecision, JudgeKind, JudgeOverride, JudgeRun, PreflightCheck, Stage

if TYPE_CHECKING:  # type hints only: judging reaches a Note through its relations (notes sits above)
    from notes.models import Note


def unjudgeable_reason(note: Note) -> str | None:
    """Why the judges must not see this note, or None: an imported post without its text
    would be judged by its placeholder."""
    return note.post.text_missing_reason()


@dataclass(frozen=True)
class JudgedNote:
    """The note text a decision was made on, and whether it is that version for sure."""

    text: str
    # True: stored with the decision, or the note's current version is the one judged (same
    # content hash). False: an older decision that stored no note text, on a note changed since.
    exact: bool


def note_as_judged(decision: JudgeDecision) -> JudgedNote:
    """The note text of the version this decision judged (stored in the decision's inputs; a
    decision without it gets the current text, said to be exact only when its content hash matches)."""
    stored = decision.inputs.get("note_text_judged") if isinstance(decision.inputs, dict) else None
    if stored:
        return JudgedNote(str(stored), True)
    current = judge_input_for_note(decision.note)
    return JudgedNote(decision.note.text, judge_content_hash(current) == decision.content_hash)


def judge_input_for_note(note: Note) -> JudgeInput:
    """What the judges see for a note: its post, text, URLs and non-rejected snippets."""
    snippets = (
        Snippet.objects.filter(note=note, passage__isnull=False)
        .exclude(confirmation=Snippet.Confirmation.REJECTED)
        .select_related("passage")
        .order_by("position", "id")
    )
    return JudgeInput(
        post=note.post.text,
        note=note.text,
        urls=tuple(str(u) for u in (note.evidence_urls or [])),
        snippets=tuple(Evidence(text=s.passage.text, source=s.url) for s in snippets if s.passage),
    )


def decisions_for_run(run: JudgeRun) -> list[JudgeDecision]:
    """The run's decisions in stage order."""
    found = {d.stage: d for d in JudgeDecision.objects.filter(note_id=run.note_id, content_hash=run.content_hash)}
    return [found[s] for s in STAGES if s in found]


def latest_run_for_note(note: Note) -> JudgeRun | None:
    return JudgeRun.objects.filter(note=note).order_by("-created_at", "-id").first()


@dataclass(frozen=True)
class DecisionFilters:
    stage: str = ""
    verdict: str = ""
    judge_kind: str = ""
    judge_name: str = ""
    date_from: dt.date | None = None
    date_to: dt.date | None = None


def decisions_filtered(filters: DecisionFilters) -> QuerySet[JudgeDecision]:
    qs = JudgeDecision.objects.select_related("note__post", "overridden_by").order_by("-created_at", "-id")
    if filters.stage:
        qs = qs.filter(stage=filters.stage)
    if filters.verdict:
        qs = qs.filter(verdict=filters.verdict)
    if filters.judge_kind:
        qs = qs.filter(judge_kind=filters.judge_kind)
    if filters.judge_name:
        qs = qs.filter(judge_name=filters.judge_name)
    if filters.date_from:
        qs = qs.filter(created_at__date__gte=filters.date_from)
    if filters.date_to:
        qs = qs.filter(created_at__date__lte=filters.date_to)
    return qs


# What the audit list shows of a decision and its note. The inputs, prompt and raw output (often
# kilobytes of JSON and text each) and the note's scorer fields are read on the decision's page.
LISTED_FIELDS = (
    "id", "note", "content_hash", "stage", "verdict", "override_verdict", "judge_kind", "judge_name",
    "latency_ms", "created_at", "note__text",
)  # fmt: skip


def decisions_listed(filters: DecisionFilters) -> QuerySet[JudgeDecision]:
    """The filtered decisions as the audit list shows them (newest first, only the shown fields)."""
    return decisions_filtered(filters).select_related(None).select_related("note").only(*LISTED_FIELDS)


def gated_out(decisions: Iterable[JudgeDecision]) -> dict[int, str]:
    """decision id -> label of the earlier stage that is not "yes", for each given decision that
    the gating puts out of reach (a stage judged before an admin overrode an earlier one to "no")."""
    versions = {(d.note_id, d.content_hash) for d in decisions}
    if not versions:
        return {}
    effective: dict[tuple[int, str], dict[str, str]] = defaultdict(dict)
    ids: dict[tuple[int, str, str], int] = {}
    rows = JudgeDecision.objects.filter(
        note_id__in={n for n, _ in versions}, content_hash__in={h for _, h in versions}
    ).values_list("pk", "note_id", "content_hash", "stage", "verdict", "override_verdict")
    for pk, note_id, content_hash, stage, verdict, override in rows:
        effective[(note_id, content_hash)][stage] = override or verdict
        ids[(note_id, content_hash, stage)] = pk
    out: dict[int, str] = {}
    for (note_id, content_hash), verdicts in effective.items():
        gate = stopped_by(verdicts)
        for stage, state in gated(verdicts).items():
            if state == NOT_REACHED and (note_id, content_hash, stage) in ids:
                out[ids[(note_id, content_hash, stage)]] = str(Stage(gate).label) if gate else ""
    return out


def judge_names() -> list[str]:
    return list(JudgeDecision.objects.order_by("judge_name").values_list("judge_name", flat=True).distinct())


@dataclass(frozen=True)
class Funnel:
    n_notes: int
    n_relevant: int
    n_correct: int
    n_helpful: int
    # Judged, but not with real inputs (no evidence snippets, or a post without its text).
    n_excluded: int = 0

    @staticmethod
    def _share(a: int, b: int) -> float | None:
        return a / b if b else None

    @property
    def p_r(self) -> float | None:
        return self._share(self.n_relevant, self.n_notes)

    @property
    def p_c_given_r(self) -> float | None:
        return self._share(self.n_correct, self.n_relevant)

    @property
    def p_h_given_cr(self) -> float | None:
        return self._share(self.n_helpful, self.n_correct)

    @property
    def overall(self) -> float | None:
        return self._share(self.n_helpful, self.n_notes)


Verdicts = dict[str, str]


def _verdicts_by_note(decisions: QuerySet[JudgeDecision]) -> dict[tuple[int, str], Verdicts]:
    """(note id, content hash) -> stage -> effective verdict (overrides count)."""
    out: dict[tuple[int, str], Verdicts] = {}
    for note_id, content_hash, stage, verdict, override in decisions.values_list(
        "note_id", "content_hash", "stage", "verdict", "override_verdict"
    ):
        out.setdefault((note_id, content_hash), {})[stage] = override or verdict
    return out


def _latest_versions(decisions: QuerySet[JudgeDecision]) -> QuerySet[JudgeDecision]:
    """Only decisions about each note's latest judged version."""
    latest: dict[int, str] = {}
    for note_id, content_hash in (
        JudgeRun.objects.filter(note_id__in=decisions.values("note_id"))
        .order_by("note_id", "created_at", "id")
        .values_list("note_id", "content_hash")
    ):
        latest[note_id] = content_hash
    rows = decisions.select_related(None).order_by().values_list("pk", "note_id", "content_hash")
    keep = [pk for pk, note_id, content_hash in rows if latest.get(note_id) == content_hash]
    return JudgeDecision.objects.filter(pk__in=keep)


def _real_inputs(decisions: QuerySet[JudgeDecision]) -> set[tuple[int, str]]:
    """(note id, content hash) of versions judged with real inputs: the relevance judge saw
    evidence snippets and the post's own text (not an import placeholder). Decided in SQL on the
    stored inputs, so the (large) inputs JSON of every decision is not sent to Python and parsed
    on each audit page."""
    with_snippets = Q(inputs__has_key="snippets") & ~Q(inputs__snippets=[]) & ~Q(inputs__snippets=None)
    rows = decisions.filter(with_snippets, stage=Stage.RELEVANCE, note__post__text_available=True)
    return set(rows.values_list("note_id", "content_hash"))


def _judged_split(
    decisions: QuerySet[JudgeDecision],
) -> tuple[dict[int, Verdicts], dict[int, Verdicts], QuerySet[JudgeDecision]]:
    """(note id -> verdicts of its latest judged version) for the notes judged with real inputs,
    the same for the judged notes left out because they were not, and the latest versions' decisions."""
    base = _latest_versions(decisions)
    per_note = {k: v for k, v in _verdicts_by_note(base).items() if Stage.RELEVANCE in v}
    real = _real_inputs(base)
    kept = {note_id: v for (note_id, h), v in per_note.items() if (note_id, h) in real}
    left_out = {note_id: v for (note_id, h), v in per_note.items() if (note_id, h) not in real}
    return kept, left_out, base


def _judged(decisions: QuerySet[JudgeDecision]) -> tuple[dict[int, Verdicts], set[int]]:
    """note id -> verdicts of its latest judged version, for notes judged with real inputs, and
    the ids of the judged notes left out because they were not."""
    kept, left_out, _ = _judged_split(decisions)
    return kept, set(left_out)


NO_POST_TEXT, NO_SNIPPETS = "no_post_text", "no_snippets"
EXCLUDED_REASONS = {
    NO_SNIPPETS: "judged without evidence snippets (the judges saw the post, the note and its links only)",
    NO_POST_TEXT: "judged on an imported post without its text (the judges saw a placeholder)",
}


@dataclass(frozen=True)
class ExcludedGroup:
    """Judged notes the funnel and the agreement leave out, by why, with what the judges said."""

    reason: str
    label: str
    n_notes: int
    n_demo: int  # of them, demo notes
    relevance: dict[str, int]  # the relevance verdicts (after overrides): "yes"/"no"/"error" -> notes
    judges: list[str]  # the relevance judges' names (offline baselines are named "baseline:…")


def excluded_groups(decisions: QuerySet[JudgeDecision] | None = None) -> list[ExcludedGroup]:
    """The judged notes that are not counted as judged with real inputs, grouped by why (only
    groups that have notes), so the audit says what it leaves out instead of showing zeros."""
    _, left_out, base = _judged_split(decisions if decisions is not None else JudgeDecision.objects.all())
    return _excluded_groups(left_out, base)


def _excluded_groups(left_out: dict[int, Verdicts], base: QuerySet[JudgeDecision]) -> list[ExcludedGroup]:
    if not left_out:
        return []
    relevance = base.filter(stage=Stage.RELEVANCE, note_id__in=left_out).order_by()
    facts: dict[int, tuple[bool, bool]] = {}
    judges: dict[str, set[str]] = defaultdict(set)
    rows = relevance.values_list("note_id", "note__post__text_available", "note__is_demo", "judge_name")
    for note_id, text_available, is_demo, name in rows:
        facts[note_id] = (text_available, is_demo)
        judges[NO_SNIPPETS if text_available else NO_POST_TEXT].add(name)
    groups = []
    for reason, label in EXCLUDED_REASONS.items():
        notes = [n for n in left_out if (facts[n][0] if reason == NO_SNIPPETS else not facts[n][0])]
        if not notes:
            continue
        verdicts: dict[str, int] = defaultdict(int)
        for n in notes:
            verdicts[left_out[n][Stage.RELEVANCE]] += 1
        groups.append(
            ExcludedGroup(
                reason=reason,
                label=label,
                n_notes=len(notes),
                n_demo=sum(1 for n in notes if facts[n][1]),
                relevance=dict(sorted(verdicts.items())),
                judges=sorted(judges[reason]),
            )
        )
    return groups


def judged_notes(decisions: QuerySet[JudgeDecision]) -> tuple[dict[int, Verdicts], int]:
    """note id -> verdicts of its latest judged version, for notes judged with real inputs,
    and how many judged notes were left out because they were not."""
    kept, excluded = _judged(decisions)
    return kept, len(excluded)


def funnel_of(per_note: Iterable[Verdicts], n_excluded: int = 0) -> Funnel:
    per_note = list(per_note)
    return Funnel(
        n_notes=len(per_note),
        n_relevant=sum(1 for v in per_note if v.get(Stage.RELEVANCE) == "yes"),
        n_correct=sum(1 for v in per_note if v.get(Stage.RELEVANCE) == "yes" and v.get(Stage.CORRECTNESS) == "yes"),
        n_helpful=sum(1 for v in per_note if all(v.get(s) == "yes" for s in STAGES)),
        n_excluded=n_excluded,
    )


def funnel(decisions: QuerySet[JudgeDecision] | None = None) -> Funnel:
    """P(R), P(C|R), P(H|C,R) and overall over the notes' latest judged versions judged with
    real inputs. A note counts once its relevance was judged (error verdicts count as not
    passing); notes judged without evidence or post text are counted in n_excluded only."""
    per_note, excluded = judged_notes(decisions if decisions is not None else JudgeDecision.objects.all())
    return funnel_of(per_note.values(), excluded)


@dataclass(frozen=True)
class CrowdAgreement:
    status: str
    n_notes: int
    fail_relevance: int
    fail_correctness: int  # among those that passed relevance
    judged_helpful: int
    n_excluded: int = 0  # judged without real inputs, left out

    def share(self, n: int) -> float | None:
        return n / self.n_notes if self.n_notes else None


def crowd_agreement() -> list[CrowdAgreement]:
    """For crowd-Helpful and crowd-Not-Helpful notes judged with real inputs: how many the
    judges fail at R and C (the source study: 11.7% of crowd-Helpful notes failed relevance,
    14.0% correctness). The judged notes of both statuses are read in one pass."""
    statuses = (note_status.CURRENTLY_RATED_HELPFUL, note_status.CURRENTLY_RATED_NOT_HELPFUL)
    decisions = JudgeDecision.objects.filter(note__status__in=statuses)
    kept, excluded = _judged(decisions)
    status_of = dict(decisions.order_by().values_list("note_id", "note__status").distinct())
    rows = []
    for status in statuses:
        per_note = [v for note_id, v in kept.items() if status_of.get(note_id) == status]
        rows.append(
            CrowdAgreement(
                status=note_status.LABELS[status],
                n_notes=len(per_note),
                fail_relevance=sum(1 for v in per_note if v[Stage.RELEVANCE] != "yes"),
                fail_correctness=sum(
                    1 for v in per_note if v[Stage.RELEVANCE] == "yes" and v.get(Stage.CORRECTNESS, "yes") != "yes"
                ),
                judged_helpful=sum(1 for v in per_note if all(v.get(s) == "yes" for s in STAGES)),
                n_excluded=sum(1 for note_id in excluded if status_of.get(note_id) == status),
            )
        )
    return rows


# --- The audit list's aggregates, cached -------------------------------------------------------
# The funnel, the crowd agreement, the judge names and the count of matching decisions read every
# decision (9 queries and a pass in Python); the page shows 25 rows. They are kept per web worker,
# keyed by the filters and by the newest decision, override and run (one cheap query per request:
# three index lookups), so a new decision, override or run shows at once. What that key does not
# see (a rescoring changing crowd statuses, an import) shows within AUDIT_SUMMARY_MAX_AGE_S; the
# page says when the figures were computed.
AUDIT_SUMMARY_MAX_AGE_S = 60


@dataclass(frozen=True)
class AuditSummary:
    funnel: Funnel
    agreement: list[CrowdAgreement]
    excluded: list[ExcludedGroup]
    judge_names: list[str]
    count: int  # decisions matching the filters
    computed_at: dt.datetime


_AUDIT_SUMMARIES: Memo[AuditSummary] = Memo(size=32, max_age_s=AUDIT_SUMMARY_MAX_AGE_S)


def audit_version() -> tuple[Any, ...]:
    """The newest decision, override and run ids, in one query (each an index lookup)."""
    tables = [m._meta.db_table for m in (JudgeDecision, JudgeOverride, JudgeRun)]
    # The table names come from the models, never from input.
    sql = "SELECT " + ", ".join(f"(SELECT MAX(id) FROM {connection.ops.quote_name(t)})" for t in tables)  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(sql)
        row = cursor.fetchone()
    return tuple(row) if row else ()


def audit_summary(filters: DecisionFilters) -> AuditSummary:
    """The audit list's funnel (over the filtered decisions), crowd agreement, judge names and
    the count of filtered decisions; computed at most once per AUDIT_SUMMARY_MAX_AGE_S per worker
    while no decision, override or run is added."""

    def build() -> AuditSummary:
        decisions = decisions_filtered(filters)
        kept, left_out, base = _judged_split(decisions)
        return AuditSummary(
            funnel=funnel_of(kept.values(), len(left_out)),
            agreement=crowd_agreement(),
            excluded=_excluded_groups(left_out, base),
            judge_names=judge_names(),
            count=decisions.count(),
            computed_at=timezone.now(),
        )

    return _AUDIT_SUMMARIES.get_or_build((filters, audit_version()), build).value


CSV_COLUMNS = (
    "id", "note_id", "stage", "verdict", "override_verdict", "override_reason", "overridden_by", "overridden_at",
    "judge_kind", "judge_name", "prompt_version", "latency_ms", "prompt_tokens", "completion_tokens",
    "content_hash", "created_at", "reasoning", "note_status",
)  # fmt: skip


def decision_csv_row(d: JudgeDecision) -> list[Any]:
    return [
        d.pk, d.note_id, d.stage, d.verdict, d.override_verdict, d.override_reason,
        d.overridden_by.get_username() if d.overridden_by else "",
        d.overridden_at.isoformat() if d.overridden_at else "",
        d.judge_kind, d.judge_name, d.prompt_version, d.latency_ms, d.prompt_tokens, d.completion_tokens,
        d.content_hash, d.created_at.isoformat(), d.reasoning, d.note.status,
    ]  # fmt: skip


def preflight_queue_waiting(*, check: PreflightCheck) -> bool:
    """The pre-flight is stored but the broker has not taken it yet (it was down at the time)."""
    if check.state != PreflightCheck.State.QUEUED:
        return False
    return bool(outbox_waiting([outbox_key("judging.tasks.preflight_check", [check.pk])]))


def benchmark_latest() -> dict[str, Any] | None:
    """The table of the most recently updated benchmark run under BENCHMARK_DIR (or None)."""
    data = latest_table(Path(settings.BENCHMARK_DIR))
    if data is not None:
        for row in data["modes"]:
            row["mode_text"] = MODE_TEXT.get(row["mode"], row["mode"])
    return data


# --- The contributor's view of their notes' judging ------------------------------------------


@dataclass(frozen=True)
class StageView:
    """One stage as the contributor sees it: its verdict (after any override) or why there is none."""

    stage: str
    label: str
    state: str  # "yes", "no", "error", "waiting" (queued or running), "not_reached" (an earlier stage said no)
    reasoning: str = ""
    judge_kind: str = ""
    judge_name: str = ""
    overridden: bool = False
    override_reason: str = ""  # the admin's reason, shown to the contributor
    judge_verdict: str = ""  # what the judge said, when an override changed it or gated it out
    stopped_by: str = ""  # label of the earlier stage that is not "yes" (state not_reached)


@dataclass(frozen=True)
class JudgingView:
    run_state: str
    run_state_label: str
    stages: list[StageView]
    helpful: bool | None
    error: str
    outage_retried_at: dt.datetime | None = None  # re-queued once after an LLM outage (the beat sweep)

    @property
    def running(self) -> bool:
        return self.run_state in (JudgeRun.State.QUEUED, JudgeRun.State.RUNNING)


def judging_for_notes(notes: list[Note]) -> dict[int, JudgingView]:
    """For each note, its latest judge run (the note's current version) stage by stage."""
    ids = [n.pk for n in notes]
    latest: dict[int, JudgeRun] = {}
    for run in JudgeRun.objects.filter(note_id__in=ids).order_by("note_id", "-created_at", "-id"):
        latest.setdefault(run.note_id, run)
    decisions: dict[tuple[int, str, str], JudgeDecision] = {
        (d.note_id, d.content_hash, d.stage): d
        for d in JudgeDecision.objects.filter(
            note_id__in=ids, content_hash__in=[r.content_hash for r in latest.values()]
        )
    }
    kinds = dict(JudgeKind.choices)
    views: dict[int, JudgingView] = {}
    for note_id, run in latest.items():
        found = {stage: decisions.get((note_id, run.content_hash, stage)) for stage in STAGES}
        effective = {stage: d.effective_verdict for stage, d in found.items() if d is not None}
        # Overrides re-apply the gating: stages after a "no" (the judges' or an admin's) are not reached.
        states = gated(effective)
        gate = stopped_by(effective)
        gate_label = str(Stage(gate).label) if gate else ""
        any_override = any(d is not None and d.override_verdict for d in found.values())
        stages: list[StageView] = []
        for stage in STAGES:
            label = str(Stage(stage).label)
            d = found[stage]
            state = states.get(stage)
            if state == NOT_REACHED:
                stages.append(
                    StageView(
                        stage=stage,
                        label=label,
                        state=NOT_REACHED,
                        judge_verdict=d.effective_verdict if d is not None else "",
                        stopped_by=gate_label,
                    )
                )
            elif d is not None:
                stages.append(
                    StageView(
                        stage=stage,
                        label=label,
                        state=d.effective_verdict,
                        reasoning=d.reasoning or d.error,
                        judge_kind=str(kinds.get(d.judge_kind, d.judge_kind)),
                        judge_name=d.judge_name,
                        overridden=bool(d.override_verdict),
                        override_reason=d.override_reason if d.override_verdict else "",
                        judge_verdict=d.verdict if d.override_verdict else "",
                    )
                )
            elif run.state in (JudgeRun.State.DONE, JudgeRun.State.FAILED):
                stages.append(StageView(stage=stage, label=label, state=NOT_REACHED, stopped_by=gate_label))
            else:
                stages.append(StageView(stage=stage, label=label, state="waiting"))
        views[note_id] = JudgingView(
            run_state=run.state,
            run_state_label=JudgeRun.State(run.state).label,
            stages=stages,
            helpful=helpful_of(states) if any_override else run.helpful,
            error=run.error,
            outage_retried_at=run.outage_retried_at,
        )
    return views


@dataclass(frozen=True)
class UsageRow:
    username: str
    today: int
    week: int
    remaining: int | None  # None: no budget (LLM_DAILY_CALLS_PER_USER = 0)


@dataclass(frozen=True)
class LlmUsageOverview:
    day: dt.date
    budget: int
    rows: list[UsageRow]


def llm_usage(*, days: int = 7, limit: int = 200) -> LlmUsageOverview:
    """Who used LLM calls today (UTC) and over the last `days` days, most calls today first."""
    today = timezone.now().date()
    since = today - dt.timedelta(days=days - 1)
    budget = settings.LLM_DAILY_CALLS_PER_USER
    totals = (
        LlmUsage.objects.filter(day__gte=since)
        .values("user_id", "user__username")
        .annotate(today=Sum("calls", filter=Q(day=today)), week=Sum("calls"))
        .order_by(F("today").desc(nulls_last=True), "-week", "user__username")[:limit]
    )
    rows = [
        UsageRow(
            username=row["user__username"],
            today=row["today"] or 0,
            week=row["week"] or 0,
            remaining=max(budget - (row["today"] or 0), 0) if budget else None,
        )
        for row in totals
    ]
    return LlmUsageOverview(day=today, budget=budget, rows=rows)
