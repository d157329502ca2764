"""Full-text storage and lexical query of the local evidence index, on the app's own database.

PostgreSQL: a stored generated column `search_vector` = `setweight(to_tsvector(title), 'A') ||
setweight(to_tsvector(text), 'B')` (the database keeps it in step; Django never writes it) with a
partial GIN index over indexed sources, ranked by ts_rank, snippets by ts_headline. SQLite (the embedded default): an
FTS5 table over the same columns kept in step by triggers, ranked by bm25(), snippets by snippet().
Both are real search engines with stemming and an inverted index; nothing here ranks by hand.

`ensure_schema` creates what is missing (migration 0004 and every post_migrate: SQLite drops a
table's triggers when Django rebuilds the table for a later migration, so they are re-created
and the FTS table rebuilt then).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from datetime import date
from typing import Any

from django.db import connection as default_connection

TABLE = "evidence_evidencesource"
FTS = "evidence_index_fts"
# PostgreSQL: at most this much of a page's text goes into its tsvector (a tsvector is capped at 1 MB).
PG_TEXT_LIMIT = 200_000
PG_VECTOR = (
    "(setweight(to_tsvector('english', coalesce(title, '')), 'A') || "
    f"setweight(to_tsvector('english', left(coalesce(cleaned_text, ''), {PG_TEXT_LIMIT})), 'B'))"
)
UNDATED_RULES = ("exclude", "include")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


@dataclass(frozen=True)
class IndexHit:
    source_id: int
    url: str
    final_url: str
    title: str
    snippet: str
    published: date | None
    content_hash: str
    domain: str
    category: str
    language: str
    copy_url: str
    score: float  # higher is better (bm25 sign flipped on SQLite)


def ensure_schema(connection: Any = None) -> None:
    """Create the full-text index (idempotent)."""
    connection = connection or default_connection
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # Stored, not computed per query: ranking reads the vector of every matching row.
            cursor.execute(
                f"ALTER TABLE {TABLE} ADD COLUMN IF NOT EXISTS search_vector tsvector "
                f"GENERATED ALWAYS AS ({PG_VECTOR}) STORED"
            )
            cursor.execute(
                f"CREATE INDEX IF NOT EXISTS evidence_index_gin ON {TABLE} USING GIN (search_vector) "
                "WHERE indexed_at IS NOT NULL"
            )
        elif connection.vendor == "sqlite":
            cursor.execute(f"SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name LIKE '{FTS}_%'")
            had_triggers = cursor.fetchone()[0] == 3
            cursor.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS} USING fts5(title, cleaned_text, "
                f"content='{TABLE}', content_rowid='id', tokenize='porter unicode61')"
            )
            cursor.execute(
                f"CREATE TRIGGER IF NOT EXISTS {FTS}_ai AFTER INSERT ON {TABLE} BEGIN "
                f"INSERT INTO {FTS}(rowid, title, cleaned_text) VALUES (new.id, new.title, new.cleaned_text); END"
            )
            cursor.execute(
                f"CREATE TRIGGER IF NOT EXISTS {FTS}_ad AFTER DELETE ON {TABLE} BEGIN "
                f"INSERT INTO {FTS}({FTS}, rowid, title, cleaned_text) "
                f"VALUES ('delete', old.id, old.title, old.cleaned_text); END"
            )
            cursor.execute(
                f"CREATE TRIGGER IF NOT EXISTS {FTS}_au AFTER UPDATE OF title, cleaned_text ON {TABLE} BEGIN "
                f"INSERT INTO {FTS}({FTS}, rowid, title, cleaned_text) "
                f"VALUES ('delete', old.id, old.title, old.cleaned_text); "
                f"INSERT INTO {FTS}(rowid, title, cleaned_text) VALUES (new.id, new.title, new.cleaned_text); END"
            )
            if not had_triggers:  # rows written while the triggers were missing are not in the index
                cursor.execute(f"INSERT INTO {FTS}({FTS}) VALUES ('rebuild')")


# Words the query parser drops (PostgreSQL's english configuration drops them too; FTS5 would
# otherwise require them).
_STOPWORDS = frozenset(
    "a an and are as at be been but by can could did do does for from had has have he her his how i if in into "
    "is it its just of on or our she so than that the their them then there these they this to was we were "
    "what when which who why will with you your".split()
)
_PHRASE = re.compile(r'"([^"]*)"')


def query_terms(text: str, limit: int = 24) -> list[str]:
    """The words of a search query, lower-cased and de-duplicated (no operators pass through);
    stop words are dropped, digits kept ("type 2 diabetes")."""
    words = (w.lower() for w in _WORD.findall(text))
    return list(dict.fromkeys(w for w in words if (len(w) > 1 or w.isdigit()) and w not in _STOPWORDS))[:limit]


def query_groups(text: str, limit: int = 12) -> list[str]:
    """What a document must contain to match: every group, where a group is one word of the
    query or a quoted phrase (its words in that order, next to each other). Stop words alone are
    not groups. Each database parses a group with its own document parser (so "covid-19" matches
    however the engine splits it)."""
    groups = [" ".join(phrase.split()) for phrase in _PHRASE.findall(text) if _WORD.search(phrase)]
    for token in _PHRASE.sub(" ", text).split():
        token = token.strip("\"'’.,;:!?()[]{}")
        words = [w.lower() for w in _WORD.findall(token)]
        if words and any((len(w) > 1 or w.isdigit()) and w not in _STOPWORDS for w in words):
            groups.append(token.lower())
    return list(dict.fromkeys(groups))[:limit]


def _pg_tsquery(groups: list[str]) -> tuple[str, list[str]]:
    """SQL for the AND of the groups (phrases keep their word order), and its parameters."""
    parts = ["phraseto_tsquery('english', %s)" if " " in g else "plainto_tsquery('english', %s)" for g in groups]
    return " && ".join(parts), groups


def _fts_match(groups: list[str]) -> str:
    return " AND ".join('"' + " ".join(_WORD.findall(g.replace('"', ""))) + '"' for g in groups)


def search(
    query: str,
    *,
    k: int,
    cutoff: date | None = None,
    undated: str = "exclude",
    snippets: bool = True,
    connection: Any = None,
) -> list[IndexHit]:
    """Indexed documents that contain every word and quoted phrase of the query (AND semantics:
    a document with one common word of the query is not a match), best first by rank (rarer and
    more frequent matches first). With a cutoff, only documents published before it; the undated
    ones follow `undated` ("exclude": unknown dates could be later; "include"). snippets=False
    leaves them empty (see `with_snippets`: the backend asks for them after its rerank, for the
    hits it keeps)."""
    if undated not in UNDATED_RULES:
        raise ValueError(f"undated rule must be one of {UNDATED_RULES}")
    groups = query_groups(query)
    if not groups or k <= 0:
        return []
    connection = connection or default_connection
    date_sql, date_params = "", []
    if cutoff is not None:
        date_sql = " AND (s.published_at < %s" + (" OR s.published_at IS NULL)" if undated == "include" else ")")
        date_params = [cutoff]
    columns = "s.id, s.url, s.final_url, s.title, s.published_at, s.content_hash, s.domain, s.category, s.language, s.copy_url"
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            tsquery, params = _pg_tsquery(groups)
            cursor.execute(
                f"SELECT {columns}, r.rank, '' FROM (SELECT s.id, ts_rank(s.search_vector, t.q, 1) AS rank "
                f"FROM {TABLE} s, (SELECT {tsquery} AS q) t WHERE s.indexed_at IS NOT NULL "
                f"AND s.search_vector @@ t.q{date_sql} ORDER BY rank DESC, s.id LIMIT %s) r "
                f"JOIN {TABLE} s ON s.id = r.id ORDER BY r.rank DESC, s.id",
                [*params, *date_params, k],
            )
        else:
            cursor.execute(
                f"SELECT {columns}, -bm25({FTS}, 4.0, 1.0) AS rank, '' "
                f"FROM {FTS} JOIN {TABLE} s ON s.id = {FTS}.rowid "
                f"WHERE {FTS} MATCH %s AND s.indexed_at IS NOT NULL{date_sql} ORDER BY rank DESC, s.id LIMIT %s",
                [_fts_match(groups), *date_params, k],
            )
        rows = list(cursor.fetchall())
    hits = [
        IndexHit(
            source_id=row[0],
            url=row[1],
            final_url=row[2] or row[1],
            title=row[3] or row[1],
            published=_as_date(row[4]),
            content_hash=row[5] or "",
            domain=row[6] or "",
            category=row[7] or "",
            language=row[8] or "",
            copy_url=row[9] or "",
            score=float(row[10]),
            snippet=" ".join((row[11] or "").split()),
        )
        for row in rows
    ]
    return with_snippets(query, hits, connection=connection) if snippets else hits


def with_snippets(query: str, hits: list[IndexHit], *, connection: Any = None) -> list[IndexHit]:
    """The hits with a short extract around the query's words (ts_headline / FTS5 snippet())."""
    terms = query_terms(query)
    if not hits or not terms:
        return hits
    connection = connection or default_connection
    ids = [h.source_id for h in hits]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT id, ts_headline('english', left(cleaned_text, 8000), to_tsquery('english', %s), "
                '\'MaxWords=45, MinWords=20, MaxFragments=1, StartSel="", StopSel=""\') '
                f"FROM {TABLE} WHERE id = ANY(%s)",
                [" | ".join(t.replace("'", "") for t in terms), ids],
            )
        else:
            match = " OR ".join('"' + t.replace('"', "") + '"' for t in terms)
            marks = ", ".join("%s" for _ in ids)
            cursor.execute(
                f"SELECT rowid, snippet({FTS}, 1, '', '', ' … ', 40) FROM {FTS} "
                f"WHERE {FTS} MATCH %s AND rowid IN ({marks})",
                [match, *ids],
            )
        found = {row[0]: " ".join((row[1] or "").split()) for row in cursor.fetchall()}
    return [dataclasses.replace(h, snippet=found.get(h.source_id, "")) for h in hits]


def _as_date(value: Any) -> date | None:
    if value is None or isinstance(value, date):
        return value
    return date.fromisoformat(str(value)[:10])
