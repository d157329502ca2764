"""Every nav page as each demo role, on a freshly loaded demo (public sample included), in headless
Chromium. Fails on: a table with no row and no explanation, a chart with nothing drawn, a negative
or impossible delay, "Not classified yet" for posts that have text, a candidate list with
duplicates, a "next run" in the past shown as upcoming. One screenshot per page (into docs/images/demo/
when refreshing the documentation's images: tests/support/screenshots.py).

As on the demo's first start (scripts/lib/warmup.sh), the jury's model is trained and one offline
Supernote run is queued for the demo's stuck post, and done here as the worker does it: the walk
then also checks that run (distinct candidates, the winner re-estimated on fresh draws, labelled
offline), its proposal on the post page, and the blind comparison offered to a rater."""

from __future__ import annotations

import io
import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as settings_module
from django.core.management import call_command
from django.utils import timezone

from judging import services as judging
from judging.benchmark import queued
from judging.models import JudgeDecision, JudgeRun
from notes.demo import CAMP_RATERS, DEMO_PASSWORD, DEMO_USERS
from notes.models import Note, NoteVersion, Post, RevisionRun, ScoringRun, SupernoteRun
from notes.supernotes import services as supernotes
from notes.supernotes.candidates import normalized_text
from tests.support.screenshots import artifact_path, docs_image_path

ROOT = Path(__file__).resolve().parents[2]
DEMO_DATASET = ROOT / "bench" / "benchmark_demo.jsonl"
SKIP = ("/django-admin/", "/accounts/logout/")


SHOT_MAX_HEIGHT = 3000  # px: the whole page up to this height (the Stuck posts list runs far longer)


def _shot(page: Any, name: str) -> None:
    height = min(int(page.evaluate("document.documentElement.scrollHeight")), SHOT_MAX_HEIGHT)
    width = (page.viewport_size or {"width": 1280})["width"]
    page.screenshot(
        path=str(docs_image_path(f"demo/{name}")),
        full_page=True,
        clip={"x": 0, "y": 0, "width": width, "height": height},
    )


def _login(page: Any, base: str, username: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", DEMO_PASSWORD)
    page.click("button:has-text('Log in')")
    page.wait_for_selector(".who")


def _nav_paths(page: Any) -> list[str]:
    hrefs = page.eval_on_selector_all("header nav a", "els => els.map(e => e.getAttribute('href'))")
    return [h for h in dict.fromkeys(hrefs) if h and h.startswith("/") and not h.startswith(SKIP)]


# A table says nothing when every data cell (a row's cells after its label) is 0, – or empty; it
# must then be explained (an element of class "empty-why" in its card or section). A row of words
# ("No drafts in progress.") is an explanation.
_TABLE_FACTS = """t => {
  const zero = c => /^([\u2013-]?|0+([.,]0+)?\\s*%?(\\s*\\(0+%?\\))?)$/.test(c);
  const cells = [...t.querySelectorAll('tr')].flatMap(r => {
    const tds = [...r.querySelectorAll('td')].map(c => c.innerText.trim());
    return tds.length > 1 ? tds.slice(1) : tds;
  });
  const box = t.closest('.card, section, details, figure') || t.parentElement;
  return {rows: t.querySelectorAll('tr').length, data: cells.some(c => !zero(c)),
          explained: !!(box && box.querySelector('.empty-why'))};
}"""
# A chart draws data when a bar's value is nonzero, a line rises above its axis, or a point is marked.
_CHART_DRAWS = """svg => {
  const bars = [...svg.querySelectorAll('rect > title')].some(t => /[1-9]/.test(t.textContent.split(':').pop()));
  const axis = Math.max(...[...svg.querySelectorAll('line[stroke="#333"]')].map(l => parseFloat(l.getAttribute('y1'))));
  const lines = [...svg.querySelectorAll('polyline')].some(p => p.getAttribute('points').trim().split(/\\s+/)
    .some(xy => parseFloat(xy.split(',')[1]) < axis - 0.5));
  const box = svg.closest('.card, section, figure') || svg.parentElement;
  return bars || lines || svg.querySelectorAll('circle').length > 0 || !!(box && box.querySelector('.empty-why'));
}"""
MAX_DELAY_H = 24 * 30  # the demo's ratings arrive within a day of a note: a month-long median is a data error
POST_LINK = re.compile(r"^/posts/(\d+)/$")


def _check_page(page: Any, path: str) -> None:
    # Closed <details> (e.g. the admin's list of all candidates) are opened: their text is checked too.
    page.eval_on_selector_all("main details", "els => els.forEach(e => { e.open = true; })")
    for k in range(page.locator("main table").count()):
        facts = page.locator("main table").nth(k).evaluate(_TABLE_FACTS)
        assert facts["rows"] >= 2 or facts["explained"], f"{path}: table {k} is empty without an explanation"
        assert facts["data"] or facts["explained"], f"{path}: table {k} holds only 0, – or nothing, unexplained"
    for k in range(page.locator("main svg.chart").count()):
        assert page.locator("main svg.chart").nth(k).evaluate(_CHART_DRAWS), f"{path}: chart {k} draws no data"
    text = page.locator("main").inner_text()
    assert "No benchmark run yet" not in text, f"{path}: the benchmark never ran"
    if path.startswith("/analytics/delays"):
        for row in page.locator("table.delays tr").all():
            cells = [c.strip() for c in row.locator("td").all_inner_texts()]
            if len(cells) < 5 or cells[0].startswith("never"):
                continue
            p25, p50, p75, p90 = (
                float(c.replace(",", "")) if re.fullmatch(r"-?[\d,]+(\.\d+)?", c) else None for c in cells[1:5]
            )
            assert all(v >= 0 for v in (p25, p50, p75, p90) if v is not None), f"negative delay: {cells}"
            assert p50 is None or p50 <= MAX_DELAY_H, f"impossible median delay: {cells}"
            if "verdict" in cells[0]:
                assert p90 is None or p90 <= MAX_DELAY_H, f"impossible p90 delay: {cells}"
        assert page.locator(".excluded-negative").count() == 0, "the demo has a negative delay"
    # Every page that lists posts: none with text shows (or is) "not classified yet".
    hrefs = page.eval_on_selector_all("main a[href^='/posts/']", "els => els.map(e => e.getAttribute('href'))")
    ids = {int(m.group(1)) for h in hrefs if (m := POST_LINK.match(h))}
    unclassified = Post.objects.filter(pk__in=ids, topic="", text_available=True).values_list("pk", flat=True)
    assert not list(unclassified), f"{path}: posts with text not classified: {list(unclassified)}"
    for row in page.locator("table.topics tr", has_text="Not classified yet").all():
        assert row.inner_text().split()[-1] == "0", f"{path}: posts with text not classified: {row.inner_text()}"
    if path.startswith("/scoring"):
        # The test recorded a scheduled run more than an interval ago, and beat is not running here.
        assert page.locator(".overdue").count() == 1, f"{path}: a missed scheduled run is not shown as overdue"
        match = re.search(r"Next scheduled run expected at (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC", text)
        if match:
            when = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
            assert when > datetime.now(tz=UTC) - timedelta(seconds=60), f"stale next run {when}"
    # Candidate lists: the text column, every row the jury saw (the admin list also shows the
    # drawn copies it marked "duplicate", and the draws the offline merge wrote nothing for).
    for selector, column in (("#all-candidates table", 3), ("#supernote-run > table", 2), ("table.candidates", 2)):
        for k in range(page.locator(selector).count()):
            rows = page.locator(selector).nth(k).locator("tr:has(td)")
            texts = [
                normalized_text(row.locator(f"td:nth-child({column})").inner_text())
                for row in rows.all()
                if "duplicate:" not in row.inner_text()
            ]
            shown = [t for t in texts if t]
            assert shown and len(shown) == len(set(shown)), f"{path}: duplicate candidates in {selector}: {texts}"


def _demo_supernote_run() -> SupernoteRun:
    """The warm-up's two steps (train_phm, demo_supernote), then the queued run as the worker does it."""
    call_command("train_phm", "--embedder", "hashing-bow-256", stdout=io.StringIO())
    queued = io.StringIO()
    call_command("demo_supernote", stdout=queued)
    run = SupernoteRun.objects.get()
    assert run.state == SupernoteRun.State.QUEUED and "Queued Supernote run" in queued.getvalue()
    supernotes.supernote_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.state == SupernoteRun.State.DONE, run.error
    # Offline merges that differ: each ordered subset of the 3 notes once (12), k distinct texts of the
    # n written, each distinct text scored once.
    rows = list(run.candidates.order_by("index"))
    assert len(rows) == 12 and run.n_drawn == len([r for r in rows if r.text])
    assert run.n_distinct is not None and 2 <= run.n_distinct <= run.n_drawn
    assert f"{run.n_distinct} distinct candidates of {run.n_drawn} drawn" in run.outcome
    assert {r.producer for r in rows} == {"baseline:extractive-merge-v3"}
    scored = [r for r in rows if r.jury_intercept is not None]
    assert 2 <= len(scored) == len({normalized_text(r.text) for r in scored}) <= run.n_distinct
    assert len({len(r.text) for r in scored}) > 1 and len({tuple(r.source_note_ids) for r in scored}) > 1
    # The winner's score shown is re-estimated on fresh jury draws, not the selecting maximum.
    winner = next(r for r in rows if r.index == run.winner_index)
    assert winner.jury_intercept == max(r.jury_intercept or 0.0 for r in scored)
    assert run.winner_intercept is not None and run.winner_intercept != winner.jury_intercept
    assert "on fresh jury draws" in run.outcome
    # A proposal exactly when the fresh-draw score clears 0.40 and the post's best note (the demo's
    # seeded run does not: README "Supernotes"); both outcomes are checked for what they must say.
    assert run.best_existing_intercept is not None
    clears = run.winner_intercept > max(0.40, run.best_existing_intercept)
    assert (run.proposed_note is not None) == clears, run.outcome
    if run.proposed_note is not None:
        assert run.proposed_note.origin == Note.Origin.SUPERNOTE and run.proposed_note.text == winner.text
    else:
        assert "is not above" in run.outcome, run.outcome
    return run


def _check_supernote_pages(page: Any, base: str, run: SupernoteRun) -> None:
    """The proposal on the post page (labelled offline, the fresh-draw score), the run page's
    candidates, and the blind comparison offered to a rater from the rating queue."""
    _login(page, base, "demo-admin")
    if run.proposed_note is None:  # the run page says why nothing was proposed, with its numbers
        response = page.goto(f"{base}/supernotes/runs/{run.pk}/")
        assert response is not None and response.status == 200
        _check_page(page, f"/supernotes/runs/{run.pk}/")
        assert run.outcome in page.locator("p.outcome").inner_text()
        page.click("header form button:has-text('Log out')")
        return
    response = page.goto(f"{base}/posts/{run.post_id}/")
    assert response is not None and response.status == 200
    section = page.locator("#supernote").inner_text()
    assert "Proposed Supernote" in section and "offline extractive merge" in section, section
    assert "re-estimated on fresh jury draws" in section and f"of {run.n_drawn} drawn" in section
    _shot(page, "supernote-post.png")
    response = page.goto(f"{base}/supernotes/runs/{run.pk}/")
    assert response is not None and response.status == 200
    _check_page(page, f"/supernotes/runs/{run.pk}/")
    page.click("header form button:has-text('Log out')")
    _login(page, base, "demo-rater")
    page.goto(f"{base}/rate/")
    page.locator("#compare").get_by_role("button", name="Compare two notes").click()
    page.get_by_role("heading", name="Note A").wait_for()
    html = page.content()
    assert run.proposed_note is not None and run.proposed_note.text in html and "supernote" not in html.lower()
    _shot(page, "supernote-compare.png")
    page.click("header form button:has-text('Log out')")


def _demo_judging() -> None:
    """The judge runs load_demo queued, done as the llm worker does them (offline baselines)."""
    runs = list(JudgeRun.objects.filter(note__is_demo=True))
    assert runs and len(runs) == Note.objects.filter(is_demo=True).count()
    for run in runs:
        while judging.judge_run_step(run_id=run.pk):
            pass
    assert not JudgeRun.objects.exclude(state=JudgeRun.State.DONE).exists()


def _serve_corpus(shared_data: Path, web_server: Any, folder: Path) -> Path:
    """The demo's evidence pages (the corpus's health pages), served on loopback and indexed as
    the warm-up indexes them; the demo's benchmark dataset with its URLs on this server."""
    pages = shared_data / "webpages"
    for path in sorted((pages / "health").iterdir()):
        (folder / "health").mkdir(parents=True, exist_ok=True)
        shutil.copy(path, folder / "health" / path.name)
        web_server.add(f"/health/{path.name}", path.read_bytes())
    call_command("index_documents", str(folder), "--manifest", str(pages / "manifest.tsv"),
                 "--base-url", web_server.url("/"), stdout=io.StringIO())  # fmt: skip
    dataset = folder / "benchmark_demo.jsonl"
    dataset.write_text(DEMO_DATASET.read_text().replace("http://127.0.0.1:8001/", web_server.url("/")))
    return dataset


def _demo_benchmark(dataset: Path) -> None:
    """The benchmark load_demo queued, slice after slice as the llm worker runs it."""
    progress = queued.progress_read(queued.out_dir(dataset))
    assert progress is not None and progress.state == queued.QUEUED and progress.done == 0
    while progress.state == queued.QUEUED:
        progress = queued.benchmark_slice(dataset=dataset, modes=settings_module.BENCHMARK_DEMO_MODES)
    assert (progress.state, progress.done) == (queued.DONE, progress.total), progress.message


@pytest.mark.browser
def test_every_nav_page_as_each_demo_role_on_a_fresh_demo(
    page: Any, live_server: Any, cn_data: Path, shared_data: Path, web_server: Any, no_shared_worker: None,
    settings: Any, tmp_path: Path,
) -> None:  # fmt: skip
    settings.VAR_DIR = tmp_path / "var"
    settings.BENCHMARK_DIR = tmp_path / "benchmark"
    settings.LLM_BASE_URL = ""  # the demo without an LLM: offline baselines, labelled
    settings.DEMO_BENCHMARK_DATASET = str(_serve_corpus(shared_data, web_server, tmp_path / "webpages"))
    out = io.StringIO()
    call_command("load_demo", stdout=out)
    assert "Judges queued on" in out.getvalue() and "Benchmark on benchmark_demo.jsonl queued" in out.getvalue()
    _demo_judging()
    _demo_benchmark(Path(settings.DEMO_BENCHMARK_DATASET))
    settings.PHM_DIR = tmp_path / "phm"
    run = _demo_supernote_run()
    if run.proposed_note is not None:  # its judges, as the llm worker runs them: on its sources' passages
        for judge_run in JudgeRun.objects.filter(note=run.proposed_note):
            while judging.judge_run_step(run_id=judge_run.pk):
                pass
        relevance = JudgeDecision.objects.get(note=run.proposed_note, stage="relevance")
        assert relevance.inputs["snippets"] and relevance.verdict == "yes", relevance.reasoning
    # The warm-up's living note (demo_living, once the jury model is stored): revised offline from a
    # suggester's confirmed passage of a real page, proposed by the checks, the judges and the jury;
    # its author declines the first proposal and accepts the second, which becomes version 2.
    living = io.StringIO()
    call_command("demo_living", stdout=living)
    said = living.getvalue()
    assert (
        "Declined by a person by demo-author" in said and "Accepted by a person and published by demo-author" in said
    ), said
    for judge_run in JudgeRun.objects.filter(state=JudgeRun.State.QUEUED):  # version 2's own run, as the worker does it
        while judging.judge_run_step(run_id=judge_run.pk):
            pass
    # A scheduled rescoring recorded more than an interval ago (beat is not running): the Scoring
    # page must say it is overdue, not show its "next run" in the past.
    interval = settings.CELERY_BEAT_SCHEDULE["score-notes"]["schedule"]
    missed = ScoringRun.objects.create(trigger=ScoringRun.Trigger.SCHEDULE, state=ScoringRun.State.DONE)
    ScoringRun.objects.filter(pk=missed.pk).update(created_at=timezone.now() - timedelta(seconds=interval + 600))
    page.set_viewport_size({"width": 1000, "height": 760})
    base = live_server.url
    shot: set[str] = set()
    walked: dict[str, list[str]] = {}
    for username in [*DEMO_USERS, next(iter(CAMP_RATERS))]:
        assert f"login {username} / {DEMO_PASSWORD}" in out.getvalue()
        _login(page, base, username)
        paths = _nav_paths(page)
        walked[username] = paths
        for path in ["/", *paths]:
            response = page.goto(f"{base}{path}")
            assert response is not None and response.status == 200, f"{username} {path}"
            _check_page(page, path)
            slug = path.strip("/").replace("/", "-") or "home"
            if slug not in shot:
                shot.add(slug)
                _shot(page, f"{slug}.png")
        page.click("header form button:has-text('Log out')")
    assert len(walked["demo-admin"]) >= 7 and walked["demo-rater"]
    assert {"/judging/audit/", "/judging/benchmark/", "/scoring/"} <= set(walked["demo-admin"]), walked["demo-admin"]
    _check_supernote_pages(page, base, run)
    # The analytics sub-pages, as the admin, and what the judging and the benchmark left on their pages.
    _login(page, base, "demo-admin")
    for path in ("/analytics/delays/", "/analytics/spikes/", "/analytics/judging/", "/posts/spiking/"):
        response = page.goto(f"{base}{path}")
        if response is not None and response.status == 404:
            continue
        assert response is not None and response.status == 200, path
        _check_page(page, path)
        _shot(page, f"{path.strip('/').replace('/', '-')}.png")
    page.goto(f"{base}/judging/audit/")
    # The demo's notes are judged on passages of the pages they cite (local copies): counted in the
    # funnel, every one relevant on real text, none left out as judged without snippets.
    n_demo = Note.objects.filter(is_demo=True).exclude(origin=Note.Origin.SUPERNOTE).count()
    n_judged = n_demo + (run.proposed_note is not None)
    funnel = page.locator("table.funnel").inner_text()
    assert f"{n_judged}\t100% ({n_judged})" in funnel, funnel
    assert page.locator("table.excluded").count() == 0
    # A relevance decision's page shows the note judged and the passage the judge read.
    decision = JudgeDecision.objects.filter(stage="relevance", note__is_demo=True).select_related("note").first()
    assert decision is not None
    page.goto(f"{base}/judging/audit/{decision.pk}/")
    main = " ".join(page.locator("main").inner_text().split())
    passage = " ".join(decision.inputs["snippets"][0]["text"].split())
    assert decision.note.text[:60] in main and passage[:200] in main, main[:2000]
    page.screenshot(path=str(artifact_path("demo-walk/judging-audit-decision.png")), full_page=True)
    revision = RevisionRun.objects.order_by("pk").last()
    assert revision is not None
    page.goto(f"{base}/notes/{revision.note_id}/versions/")
    _check_page(page, f"/notes/{revision.note_id}/versions/")
    versions = " ".join(page.locator("main").inner_text().split())
    for shown in (
        "Used in a published version",
        "Not used",
        "Waiting for a revision",
        "Current version (2)",
    ):
        assert shown in versions, versions[:3000]
    assert NoteVersion.objects.filter(note_id=revision.note_id).count() == 2
    page.screenshot(path=str(artifact_path("demo-walk/living-note-versions.png")), full_page=True)
    # Revision decisions: who decided each proposal, and why one was declined.
    page.goto(f"{base}/revisions/?note={revision.note_id}")
    _check_page(page, "/revisions/")
    audit = " ".join(page.locator("main").inner_text().split())
    assert "Declined by a person by demo-author" in audit and "second rater" in audit, audit[:3000]
    assert "Accepted by a person and published by demo-author" in audit, audit[:3000]
    # The post keeps version 1's Helpful status on show while version 2 gathers ratings.
    page.goto(f"{base}/posts/{revision.note.post_id}/")
    _check_page(page, f"/posts/{revision.note.post_id}/")
    shown = page.locator(f"#note-{revision.note_id}").inner_text()
    assert "Status of version 1" in shown and "Version 2 of this note is gathering ratings" in shown, shown
    page.screenshot(path=str(artifact_path("demo-walk/living-note-previous-status.png")), full_page=True)
    page.goto(f"{base}/judging/benchmark/")
    bench = page.locator("main").inner_text()
    assert "OFFLINE: offline baselines" in bench and "Demo data: 6 of 6 rows" in bench and "done" in bench
