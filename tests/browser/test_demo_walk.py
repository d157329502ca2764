"""Every nav page as each demo role, on a freshly loaded demo (public sample included), in headless
Chromium. Fails on: a table with no row and no explanation, a chart with nothing drawn, a negative
or impossible delay, "Not classified yet" for posts that have text, a candidate list with
duplicates, a "next run" in the past shown as upcoming. One screenshot per page into docs/demo/."""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from notes.demo import CAMP_RATERS, DEMO_PASSWORD, DEMO_USERS
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


@pytest.mark.browser
def test_every_nav_page_as_each_demo_role_on_a_fresh_demo(
    page: Any, live_server: Any, cn_data: Path, transactional_db: None
) -> None:
    out = io.StringIO()
    source = cn_data / "aaronbergman" / "tweet_data_checkpoint_1_subset.csv"
    call_command("load_demo", "--source", str(source), "--no-judging", stdout=out)
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
    # The analytics sub-pages, as the admin.
    _login(page, base, "demo-admin")
    for path in ("/analytics/delays/", "/analytics/spikes/", "/analytics/judging/", "/posts/spiking/"):
        response = page.goto(f"{base}{path}")
        if response is not None and response.status == 404:
            continue
        assert response is not None and response.status == 200, path
        _check_page(page, path)
        page.screenshot(path=str(DOCS / f"{path.strip('/').replace('/', '-')}.png"))
