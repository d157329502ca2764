"""Analytics pages for admins and researchers (all under /analytics/): thin views over
notes.analytics.selectors, every chart a server-rendered SVG (notes.analytics.charts) with
the same numbers in a table."""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.http import HttpResponse
from django.shortcuts import render
from django.utils.safestring import mark_safe

from crowdnotes_site.access import AuthenticatedHttpRequest, endpoint
from crowdnotes_site.lib.communitynotes.research import outputs as research_outputs
from crowdnotes_site.lib.communitynotes.research import real_figures
from crowdnotes_site.lib.csvsafe import SafeWriter
from notes.analytics import charts, selectors
from notes.analytics.forms import AnalyticsFilterForm, SpikeForm

# Analytics show every note's scores and outcomes: the admin role's permission for scores.
ANALYTICS = "notes.view_scores"

# The source study's health-note figures (../shared/specs/PRODUCT.md; the two it shares with
# `real_figures` are defined there).
STUDY_HEALTH = {
    "post_to_first_note_p50": 10.4,
    "note_to_first_verdict_p50": real_figures.STUDY_NOTE_TO_VERDICT_P50_H,
    "never_left_nmr_share": real_figures.STUDY_NMR_SHARE,
}


@endpoint(methods=["GET"], permission=ANALYTICS)
def analytics_index(request: AuthenticatedHttpRequest) -> HttpResponse:
    return render(request, "notes/analytics/index.html")


def _delay_rows(summary: selectors.DelaySummary) -> list[tuple[str, dict[str, float | int | None]]]:
    r = summary.report
    return [
        ("post → first note (hours)", r.post_to_first_note_hours.as_dict()),
        ("note → first verdict (hours)", r.note_to_first_verdict_hours.as_dict()),
    ]


@endpoint(methods=["GET"], permission=ANALYTICS)
def delays_page(request: AuthenticatedHttpRequest) -> HttpResponse:
    form = AnalyticsFilterForm(request.GET or None)
    summary = selectors.delay_summary(form.filters())
    span = selectors.note_data_span(form.filters()) if not summary.n_notes else None
    rows = _delay_rows(summary)
    chart = charts.bar_chart(
        "Delay percentiles (hours)",
        ["25th percentile", "median", "75th percentile", "90th percentile"],
        [charts.Series(name, [values[p] for p in ("p25", "p50", "p75", "p90")]) for name, values in rows],
        unit=" h",
        description="Hours from post to first note and from note to first verdict, at four percentiles.",
    )
    context = {
        "form": form,
        "summary": summary,
        "span": span,
        "span_query": _with_range(request, span),
        "imported": selectors.imported_history_summary(form.filters()),
        "rows": rows,
        "chart": mark_safe(chart),  # noqa: S308  (built by notes.analytics.charts, which escapes all text)
        "query": request.GET.urlencode(),
        "study": STUDY_HEALTH,
    }
    return render(request, "notes/analytics/delays.html", context)


def _with_range(request: AuthenticatedHttpRequest, span: tuple[dt.date, dt.date] | None) -> str:
    """The page's query with the date range set to `span` (the other filters kept)."""
    if span is None:
        return ""
    query = request.GET.copy()
    query["date_from"], query["date_to"] = span[0].isoformat(), span[1].isoformat()
    return query.urlencode()


@endpoint(methods=["GET"], permission=ANALYTICS)
def delays_csv(request: AuthenticatedHttpRequest) -> HttpResponse:
    form = AnalyticsFilterForm(request.GET or None)
    summary = selectors.delay_summary(form.filters())
    response = HttpResponse(content_type="text/csv")
    response["Content-Disposition"] = 'attachment; filename="delays.csv"'
    writer = SafeWriter(response)  # formula-looking text cells quoted
    writer.writerow(["metric", "p25", "p50", "p75", "p90", "n", "left out (negative)"])
    for name, values in _delay_rows(summary):
        writer.writerow([name, *(values[k] for k in ("p25", "p50", "p75", "p90", "n", "n_negative"))])
    writer.writerow(
        ["never left Needs More Ratings (share)", "", summary.report.never_left_nmr_share, "", "", summary.n_scored]
    )
    return response


@endpoint(methods=["GET"], permission=ANALYTICS)
def spikes_page(request: AuthenticatedHttpRequest) -> HttpResponse:
    form = SpikeForm(request.GET or None)
    unit, window, k = form.options()
    report = selectors.spike_report(form.filters(), unit=unit, window=window, k=k)
    s = report.series
    span = selectors.spike_data_span(form.filters(), unit=unit) if not s.days else None
    chart = charts.time_series_chart(
        f"{'Notes' if unit == 'notes' else 'Flagged posts'} per day",
        [d.isoformat() for d in s.days],
        [float(c) for c in s.counts],
        lines=[
            charts.Series(f"{window}-day rolling mean", s.rolling_mean),
            charts.Series(f"mean + {k:g} standard deviations", s.threshold),
        ],
        marked=[sp.index for sp in report.spikes],
        description=f"Daily counts with {len(report.spikes)} spikes marked in red.",
    )
    context = {
        "form": form,
        "report": report,
        "chart": mark_safe(chart),  # noqa: S308  (escaped by notes.analytics.charts)
        "unit": unit,
        "daily": list(zip(s.days, s.counts, s.rolling_mean, s.threshold, strict=True)),
        "rule": report.rule,
        "span": span,
        "window": window,
        "k": k,
    }
    return render(request, "notes/analytics/spikes.html", context)


@endpoint(methods=["GET"], permission=ANALYTICS)
def judging_page(request: AuthenticatedHttpRequest) -> HttpResponse:
    form = AnalyticsFilterForm(request.GET or None)
    filters = form.filters()
    rows, excluded = selectors.funnel_over_time(filters)
    cats = selectors.source_categories(filters)
    topics = selectors.topic_counts(filters)

    def pct(v: float | None) -> float | None:
        return None if v is None else 100 * v

    funnel_chart = charts.bar_chart(
        "Judge funnel by month and note origin",
        [f"{row.month} · {row.origin_label} (n={row.funnel.n_notes})" for row in rows],
        [
            charts.Series("P(R)", [pct(row.funnel.p_r) for row in rows]),
            charts.Series("P(C|R)", [pct(row.funnel.p_c_given_r) for row in rows]),
            charts.Series("P(H|C,R)", [pct(row.funnel.p_h_given_cr) for row in rows]),
            charts.Series("overall", [pct(row.funnel.overall) for row in rows]),
        ],
        unit="%",
        description="Share of notes passing each judge stage, per month of note creation and note origin, over "
        "notes judged with real inputs.",
    )
    cat_chart = charts.bar_chart(
        "Evidence sources by category",
        [label for _, label in cats.categories],
        [charts.Series("chosen by people", cats.human), charts.Series("proposed by the automation", cats.machine)],
        description="Number of evidence sources per source category, human-selected and machine-selected.",
    )
    # Posts imported without text are never classified: a bar of them would dwarf the topics'
    # bars, so they are counted in a line beside the chart instead.
    topic_bars = [row for row in topics if row[0] != selectors.NO_TEXT]
    no_text = sum(n for value, _, n in topics if value == selectors.NO_TEXT)
    topic_chart = charts.bar_chart(
        "Posts by health topic",
        [label for _, label, _ in topic_bars],
        [charts.Series("posts", [n for _, _, n in topic_bars])],
        description="Posts of the matching notes per health topic (posts imported without text left out).",
    )
    agreement, agreement_excluded = selectors.agreement_over_time(filters)
    months = sorted({row.month for row in agreement})
    origins = sorted({(row.origin, row.origin_label) for row in agreement})
    share = {(row.month, row.origin): row.share for row in agreement}
    agreement_chart = charts.bar_chart(
        "Judge-crowd agreement by month and note origin",
        months,
        [
            charts.Series(label, [None if share.get((m, o)) is None else 100 * share[(m, o)] for m in months])  # type: ignore[operator]
            for o, label in origins
        ],
        unit="%",
        description="Share of crowd-rated notes judged with real inputs on which the judges agree with the crowd.",
    )
    context = {
        "form": form,
        "topic_bars": topic_bars,
        "no_text": no_text,
        "agreement": agreement,
        "agreement_excluded": agreement_excluded,
        "agreement_chart": mark_safe(agreement_chart),  # noqa: S308  (escaped by notes.analytics.charts)
        "rows": rows,
        "funnel_chart": mark_safe(funnel_chart),  # noqa: S308  (escaped by notes.analytics.charts)
        "excluded": excluded,
        "cats": cats,
        "cat_rows": list(zip(cats.categories, cats.human, cats.machine, strict=True)),
        "cat_chart": mark_safe(cat_chart),  # noqa: S308  (escaped by notes.analytics.charts)
        "topics": topics,
        "topic_chart": mark_safe(topic_chart),  # noqa: S308  (escaped by notes.analytics.charts)
    }
    return render(request, "notes/analytics/judging.html", context)


def _research_charts(run: research_outputs.ResearchRun) -> tuple[str, str]:
    delay_chart = charts.bar_chart(
        "Delay percentiles (hours)",
        ["25th percentile", "median", "75th percentile", "90th percentile"],
        [charts.Series(name, [v.get(p) for p in ("p25", "p50", "p75", "p90")]) for name, v in run.delay_rows],
        unit=" h",
        description="Hours from post to first note and from note to its first verdicts, at four percentiles, "
        "over the whole download.",
    )
    d = run.daily
    spike_chart = charts.time_series_chart(
        "Notes per day",
        [r.day.isoformat() for r in d],
        [float(r.notes) for r in d],
        lines=[
            charts.Series("rolling mean", [r.rolling_mean for r in d]),
            charts.Series("threshold", [r.threshold for r in d]),
        ],
        marked=[i for i, r in enumerate(d) if r.spike],
        description=f"Daily notes of the whole download with {sum(r.spike for r in d)} spikes marked in red.",
    )
    return delay_chart, spike_chart


@endpoint(methods=["GET"], permission=ANALYTICS)
def research_page(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The research command's outputs (whole-download delays, spikes, statuses): files, read here."""
    folder = settings.RESEARCH_OUTPUTS_DIR
    context: dict[str, object] = {"folder": folder}
    if folder:
        try:
            run = research_outputs.read(folder)
        except research_outputs.ResearchOutputsError as exc:
            context["error"] = str(exc)
        else:
            delay_chart, spike_chart = _research_charts(run)
            context |= {
                "run": run,
                "delay_chart": mark_safe(delay_chart),  # noqa: S308  (escaped by notes.analytics.charts)
                "spike_chart": mark_safe(spike_chart),  # noqa: S308  (escaped by notes.analytics.charts)
                "study": STUDY_HEALTH,
            }
    context |= _real_figures()
    return render(request, "notes/analytics/research.html", context)


def _real_figures() -> dict[str, object]:
    """The research page's section of `manage.py real_figures`: its file as written, or why not."""
    path = real_figures.figures_path(settings.VAR_DIR)
    context: dict[str, object] = {"real_file": path}
    if path.exists():
        try:
            data = real_figures.read(path)
        except real_figures.RealFiguresError as exc:
            context["real_error"] = str(exc)
        else:
            context |= {"real": data, "real_rows": real_figures.share_rows(data)}
    return context
