"""The local evidence index: documents ingested by `manage.py index_documents` (evidence.index.ingest),
stored as EvidenceSource rows with their passages, searched with the database's own full-text
engine (evidence.index.store: PostgreSQL tsvector + GIN, SQLite FTS5) and reranked by the stored
passage embeddings (evidence.index.rerank)."""
