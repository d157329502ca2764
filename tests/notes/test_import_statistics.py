"""After an import the planner knows the new table sizes (its page queries depend on them)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection

from crowdnotes_site.dbstats import refresh_planner_statistics
from notes.models import Note, Participant, Post, Rating

pytestmark = pytest.mark.django_db


def _estimated_rows(table: str) -> float:
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = %s", [table])
        return float(cursor.fetchone()[0])


def test_the_import_refreshes_the_planners_row_estimates(cn_data: Path) -> None:
    models = (Post, Note, Participant, Rating)
    refresh_planner_statistics(*models)  # the planner knows the tables empty, as before a first import
    assert all(_estimated_rows(m._meta.db_table) <= 0 for m in models)
    call_command(
        "import_communitynotes",
        "--notes", str(cn_data / "colin-fraser" / "notes-00000.tsv"),
        "--ratings", str(cn_data / "colin-fraser" / "ratings-00000.tsv"),
        stdout=io.StringIO(), stderr=io.StringIO(),
    )  # fmt: skip
    counts = {m._meta.db_table: m.objects.count() for m in models}
    assert counts[Rating._meta.db_table] > 1000
    for table, count in counts.items():
        assert _estimated_rows(table) == pytest.approx(count, rel=0.05), table
