from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.utils.functional import cached_property

from crowdnotes_site.access import AuthenticatedHttpRequest, endpoint
from crowdnotes_site.lib.csvsafe import SafeWriter
from crowdnotes_site.lib.memo import Memo, content_key
from crowdnotes_site.limits import limited
from judging import selectors, services
from judging.benchmark.queued import progress_all
from judging.forms import DecisionFilterForm, OverrideForm, PreflightForm
from judging.models import JudgeDecision, PreflightCheck

VIEW = "judging.view_judgedecision"


# Decisions per page of the audit list (a page of 25 renders in a few milliseconds).
AUDIT_PAGE_SIZE = 25


# Every value a row shows (and the note's text).
_ROW_FIELDS = (
    "pk", "created_at", "stage", "verdict", "override_verdict", "stopped_by", "judge_kind", "judge_name", "latency_ms",
)  # fmt: skip
_ROWS: Memo[str] = Memo(size=64)


class CountedPaginator(Paginator):
    """A paginator told the number of rows (counted with the page's cached aggregates) instead
    of running COUNT(*) over the decisions on every request."""

    def __init__(self, object_list: Any, per_page: int, *, count: int) -> None:
        super().__init__(object_list, per_page)
        self._known_count = count

    @cached_property
    def count(self) -> int:
        return self._known_count


@endpoint(methods=["GET"], permission=VIEW)
def decision_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    form = DecisionFilterForm(request.GET or None)
    filters = form.filters()
    summary = selectors.audit_summary(filters)
    paginator = CountedPaginator(selectors.decisions_listed(filters), AUDIT_PAGE_SIZE, count=summary.count)
    page = paginator.get_page(request.GET.get("page"))
    stopped = selectors.gated_out(page.object_list)
    decisions = list(page.object_list)
    for d in decisions:
        d.stopped_by = stopped.get(d.pk, "")  # type: ignore[attr-defined]
    # The rows are the same for every admin: rendered once per worker and content.
    rows = _ROWS.get_or_build(
        content_key([[getattr(d, f) for f in _ROW_FIELDS] + [d.note.text] for d in decisions]),
        lambda: render_to_string("judging/_decision_rows.html", {"decisions": decisions}),
    )
    context = {
        "form": form,
        "page": page,
        "rows": rows.value,
        "funnel": summary.funnel,
        "agreement": summary.agreement,
        "excluded": summary.excluded,
        "judge_names": summary.judge_names,
        "computed_at": summary.computed_at,
        "query": request.GET.urlencode(),
    }
    template = "judging/decision_list.html" + ("#table-section" if request.htmx else "")
    return render(request, template, context)


@endpoint(methods=["GET"], permission=VIEW)
def decision_detail(request: AuthenticatedHttpRequest, decision_id: int) -> HttpResponse:
    decision = get_object_or_404(JudgeDecision.objects.select_related("note__post", "run"), pk=decision_id)
    return _detail(request, decision, OverrideForm())


def _detail(request: HttpRequest, decision: JudgeDecision, form: OverrideForm, status: int = 200) -> HttpResponse:
    context = {
        "d": decision,
        "form": form,
        "overrides": decision.overrides.select_related("by"),
        "stopped_by": selectors.gated_out([decision]).get(decision.pk, ""),
        "judged_note": selectors.note_as_judged(decision),
    }
    return render(request, "judging/decision_detail.html", context, status=status)


@endpoint(methods=["POST"], permission="judging.change_judgedecision")
def decision_override(request: AuthenticatedHttpRequest, decision_id: int) -> HttpResponse:
    decision = get_object_or_404(JudgeDecision, pk=decision_id)
    form = OverrideForm(request.POST)
    if not form.is_valid():
        return _detail(request, decision, form, status=400)
    services.decision_override(
        decision=decision, verdict=form.cleaned_data["verdict"], reason=form.cleaned_data["reason"], user=request.user
    )
    messages.success(request, "Override saved with your reason.")
    return redirect("judging:decision_detail", decision_id=decision.pk)


@endpoint(methods=["GET"], permission=VIEW)
def decision_export(request: AuthenticatedHttpRequest) -> HttpResponse:
    decisions = selectors.decisions_filtered(DecisionFilterForm(request.GET or None).filters())
    response = HttpResponse(content_type="text/csv")
    response["Content-Disposition"] = 'attachment; filename="judge-decisions.csv"'
    writer = SafeWriter(response)  # formula-looking text cells quoted
    writer.writerow(selectors.CSV_COLUMNS)
    writer.writerows(selectors.decision_csv_row(d) for d in decisions.iterator())
    return response


@endpoint(methods=["GET", "POST"], permission="notes.add_note")
@limited("preflight")
def preflight(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Queue the judges on a draft (a worker runs them) and show the result page; submits nothing."""
    form = PreflightForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        check = services.preflight_request(
            user=request.user,
            post_text=form.cleaned_data["post_text"],
            note_text=form.cleaned_data["note_text"],
            urls=form.url_list(),
            snippets=form.snippet_list(),
        )
        if request.htmx:
            context = {"form": form, "check": check, "queue_waiting": selectors.preflight_queue_waiting(check=check)}
            return render(request, "judging/preflight.html#result-section", context)
        return redirect("judging:preflight_detail", check_id=check.pk)
    template = "judging/preflight.html" + ("#result-section" if request.htmx else "")
    return render(request, template, {"form": form}, status=400 if form.errors and not request.htmx else 200)


@endpoint(methods=["GET"], permission="notes.add_note")
def preflight_detail(request: AuthenticatedHttpRequest, check_id: int) -> HttpResponse:
    """The pre-flight's result page (polled by htmx while the judges work; refreshes without JS)."""
    check = get_object_or_404(PreflightCheck, pk=check_id, requested_by=request.user)
    context = {"check": check, "queue_waiting": selectors.preflight_queue_waiting(check=check)}
    if request.htmx:
        return render(request, "judging/preflight.html#result-section", context)
    return render(request, "judging/preflight_detail.html", context)


@endpoint(methods=["GET"], permission=VIEW)
def benchmark_results(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The latest `run_benchmark` run's table (read from its out dir under BENCHMARK_DIR)."""
    from django.conf import settings

    progress = progress_all()
    context = {
        "run": selectors.benchmark_latest(),
        "benchmark_dir": settings.BENCHMARK_DIR,
        "progress": progress,
        "active": any(p.active for p in progress),
    }
    template = "judging/benchmark.html" + ("#results" if request.htmx else "")
    return render(request, template, context)


@endpoint(methods=["GET"], permission=VIEW)
def llm_usage(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Admin: LLM calls per user today against the daily budget, and the last 7 days' totals."""
    return render(request, "judging/llm_usage.html", {"usage": selectors.llm_usage()})
