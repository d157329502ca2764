"""The benchmarks' own PostgreSQL database, made anew (defined once for the benchmarks that wipe theirs)."""

from __future__ import annotations


def recreate_database(url: str) -> None:
    """Drop the database `url` names (ending its sessions) and create it empty. Only for a
    benchmark's own database: everything in it is lost."""
    import psycopg

    base, name = url.rsplit("/", 1)
    with psycopg.connect(base + "/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
