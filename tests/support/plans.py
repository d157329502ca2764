"""The query plan PostgreSQL would use for a queryset, with sequential scans and sorts priced out,
so a test can hold a page's read on the index meant for it at any table size."""

from __future__ import annotations

from typing import Any

from django.db import connection


def index_plan(queryset: Any) -> str:
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())
