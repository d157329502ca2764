"""Every nav page as each demo role, on a freshly loaded demo (public sample included), in headless
Chromium. Fails on: a table with no row and no explanation, a chart with nothing drawn, a negative
or impossible delay, "Not classified yet" for posts that have text, a candidate list with
duplicates, a "next run" in the past shown as upcoming. One screenshot per page into docs/demo/.

As on the demo's first start (scripts/lib/warmup.sh), the jury's model is trained and one offline
Supernote run is queued for the demo's stuck post, and done here as the worker does it: the walk
then also checks that run (distinct candidates, the winner re-estimated on fresh draws, labelled
offline), its proposal on the post page, and the blind comparison offered to a rater."""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from notes.demo import CAMP_RATERS, DEMO_PASSWORD, DEMO_USERS
from notes.models import Note, SupernoteRun
from notes.supernotes import services as supernotes
from notes.supernotes.candidates import normalized_text

DOCS = Path(__file__).resolve().parents[2] / "docs" / "demo"
SKIP = ("/django-admin/", "/accounts/logout/")


def _login(page: Any, base: str, username: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", DEMO_PASSWORD)
    page.click("button:has-text('Log in')")
    page.wait_for_selector(".who")


def _nav_paths(page: Any) -> list[str]:
    hrefs = page.eval_on_selector_all("header nav a", "els => els.map(e => e.getAttribute('href'))")
    return [h for h in dict.fromkeys(hrefs) if h and h.startswith("/") and not h.startswith(SKIP)]


def _check_page(page: Any, path: str) -> None:
    # Tables: a table with only its header row says nothing; every empty table has an explaining row.
    for k in range(page.locator("main table").count()):
        table = page.locator("main table").nth(k)
        assert table.locator("tr").count() >= 2, f"{path}: table {k} is empty without an explanation"
    # Charts: something drawn (a bar, a line, a point) or a labelled "no data".
    for k in range(page.locator("main svg.chart").count()):
        svg = page.locator("main svg.chart").nth(k)
        drawn = svg.locator("rect").count() - 1 + svg.locator("polyline").count() + svg.locator("circle").count()
        assert drawn > 0 or "no data" in svg.inner_html(), f"{path}: chart {k} draws nothing"
    text = page.locator("main").inner_text()
    if path.startswith("/analytics/delays"):
        cells = page.locator("table.delays td").all_inner_texts()
        assert not [c for c in cells if re.fullmatch(r"-\d+(\.\d+)?", c.strip())], f"negative delay: {cells}"
        assert page.locator(".excluded-negative").count() == 0, "the demo has a negative delay"
    if path.startswith("/analytics/judging"):
        row = page.locator("table.topics tr", has_text="Not classified yet").inner_text()
        assert row.split()[-1] == "0", f"posts with text not classified: {row}"
    if path.startswith("/scoring"):
        match = re.search(r"Next scheduled run expected at (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC", text)
        if match:
            when = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
            assert when > datetime.now(tz=UTC) - timedelta(seconds=60), f"stale next run {when}"
    for k in range(page.locator("table.candidates, #all-candidates table").count()):
        texts = page.locator("table.candidates, #all-candidates table").nth(k).locator("td:nth-child(2)")
        shown = [normalized_text(t) for t in texts.all_inner_texts() if t.strip()]
        assert len(shown) == len(set(shown)), f"{path}: duplicate candidates"


def _demo_supernote_run(source: Path) -> SupernoteRun:
    """The warm-up's two steps (train_phm, demo_supernote), then the queued run as the worker does it."""
    call_command("train_phm", "--embedder", "hashing-bow-256", stdout=io.StringIO())
    queued = io.StringIO()
    call_command("demo_supernote", "--source", str(source), stdout=queued)
    run = SupernoteRun.objects.get()
    assert run.state == SupernoteRun.State.QUEUED and "Queued Supernote run" in queued.getvalue()
    supernotes.supernote_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.state == SupernoteRun.State.DONE, run.error
    # Offline merges that differ: k distinct of n drawn, each distinct text scored once.
    rows = list(run.candidates.order_by("index"))
    assert run.n_drawn == len(rows) == 100 and run.n_distinct is not None and 2 <= run.n_distinct < run.n_drawn
    assert f"{run.n_distinct} distinct candidates of {run.n_drawn} drawn" in run.outcome
    assert {r.producer for r in rows} == {"baseline:extractive-merge-v2"}
    scored = [r for r in rows if r.jury_intercept is not None]
    assert 2 <= len(scored) == len({normalized_text(r.text) for r in scored}) <= run.n_distinct
    assert len({len(r.text) for r in scored}) > 1 and len({tuple(r.source_note_ids) for r in scored}) > 1
    # The winner's score shown is re-estimated on fresh jury draws, not the selecting maximum.
    winner = next(r for r in rows if r.index == run.winner_index)
    assert winner.jury_intercept == max(r.jury_intercept or 0.0 for r in scored)
    assert run.winner_intercept is not None and run.winner_intercept != winner.jury_intercept
    assert "on fresh jury draws" in run.outcome
    # The demo's stuck post qualifies: a proposal, above 0.40 and the post's best note.
    assert run.proposed_note is not None, run.outcome
    assert run.proposed_note.origin == Note.Origin.SUPERNOTE and run.proposed_note.text == winner.text
    assert run.best_existing_intercept is not None and run.winner_intercept > max(0.40, run.best_existing_intercept)
    return run


def _check_supernote_pages(page: Any, base: str, run: SupernoteRun) -> None:
    """The proposal on the post page (labelled offline, the fresh-draw score), the run page's
    candidates, and the blind comparison offered to a rater from the rating queue."""
    _login(page, base, "demo-admin")
    response = page.goto(f"{base}/posts/{run.post_id}/")
    assert response is not None and response.status == 200
    section = page.locator("#supernote").inner_text()
    assert "Proposed Supernote" in section and "offline extractive merge" in section, section
    assert "re-estimated on fresh jury draws" in section and f"of {run.n_drawn} drawn" in section
    page.screenshot(path=str(DOCS / "supernote-post.png"), full_page=True)
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
    page.screenshot(path=str(DOCS / "supernote-compare.png"), full_page=True)
    page.click("header form button:has-text('Log out')")


@pytest.mark.browser
def test_every_nav_page_as_each_demo_role_on_a_fresh_demo(
    page: Any, live_server: Any, cn_data: Path, no_shared_worker: None, settings: Any, tmp_path: Path
) -> None:
    out = io.StringIO()
    source = cn_data / "aaronbergman" / "tweet_data_checkpoint_1_subset.csv"
    call_command("load_demo", "--source", str(source), "--no-judging", stdout=out)
    settings.PHM_DIR = tmp_path / "phm"
    run = _demo_supernote_run(source)
    DOCS.mkdir(parents=True, exist_ok=True)
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
                page.screenshot(path=str(DOCS / f"{slug}.png"))
        page.click("header form button:has-text('Log out')")
    assert len(walked["demo-admin"]) >= 7 and walked["demo-rater"]
    _check_supernote_pages(page, base, run)
    # The analytics sub-pages, as the admin.
    _login(page, base, "demo-admin")
    for path in ("/analytics/delays/", "/analytics/spikes/", "/analytics/judging/", "/posts/spiking/"):
        response = page.goto(f"{base}{path}")
        if response is not None and response.status == 404:
            continue
        assert response is not None and response.status == 200, path
        _check_page(page, path)
        page.screenshot(path=str(DOCS / f"{path.strip('/').replace('/', '-')}.png"))
