"""Planner statistics after bulk writes.

PostgreSQL plans each query from row estimates that ANALYZE (or autovacuum) refreshes. Right after a
bulk load or a rewrite of most rows the estimates are stale (a table just filled is still "empty",
a status column just rewritten still has its old values) and the planner picks whole-table scans for
pages that need a few index reads; a server with autovacuum off never catches up. Bulk writers call
this when they finish.
"""

from __future__ import annotations

from django.db import connection
from django.db.models import Model


def refresh_planner_statistics(*models: type[Model]) -> None:
    """ANALYZE the tables of `models` (PostgreSQL; a no-op elsewhere)."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        for model in models:
            cursor.execute(f"ANALYZE {connection.ops.quote_name(model._meta.db_table)}")
