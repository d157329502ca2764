"""The analytics pages on the imported real sample, in headless Chromium (charts drawn, tables beside)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from notes.roles import ADMIN
from tests.support.screenshots import docs_image_path


def _shot(page: Any, name: str) -> None:
    page.screenshot(path=str(docs_image_path(f"analytics-{name}.png")), full_page=True)


@pytest.mark.browser
def test_an_admin_sees_the_analytics_of_the_imported_sample(
    page: Any, live_server: Any, make_user: Any, cn_data: Path, transactional_db: None
) -> None:
    call_command(
        "import_communitynotes",
        "--notes", str(cn_data / "colin-fraser/notes-00000.tsv"),
        "--status-history", str(cn_data / "mcroston/noteStatusHistory-00000.tsv"),
        stdout=io.StringIO(),
    )  # fmt: skip
    make_user("ana", ADMIN)
    base = live_server.url
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", "ana")
    page.fill("#id_password", "pw-for-tests-123")
    page.click("button:has-text('Log in')")
    page.click("nav >> text=Analytics")
    page.click("text=Delays")

    chart = page.locator("svg.chart[role=img]")
    assert (
        chart.count() == 1 and chart.locator("rect[fill='#2b6cb0'][height='12']").count() == 4
    )  # one bar per percentile
    assert page.locator("table.delays tr").count() == 4
    assert "3,768" not in page.content()  # n is printed plainly
    assert page.locator("table.delays").inner_text().count("3768") == 1
    # note -> first verdict over the whole imported status history (868 notes reached a verdict)
    imported = page.locator("table.delays-imported").inner_text()
    assert "868" in imported and "36118" in imported
    _shot(page, "delays")

    page.goto(f"{base}/analytics/spikes/?unit=posts")
    assert page.locator("svg.chart polyline").count() >= 2
    markers = page.locator("svg.chart circle[fill='#c53030']").count()
    assert markers >= 2 and page.locator("table.spikes tr").count() == markers + 1
    assert "2021-01-28" in page.locator("table.spikes").inner_text()
    _shot(page, "spikes")

    page.goto(f"{base}/analytics/judging/")
    # Categories and topics; no crowd-rated note of the sample was judged with real inputs, so the
    # agreement table explains its emptiness instead of drawing a bare axis.
    assert page.locator("svg.chart").count() == 2
    assert "No crowd-rated note matching the filters was judged" in page.locator("table.agreement-time").inner_text()
    assert "Health authority" in page.locator("table.categories").inner_text()
    _shot(page, "judging")
