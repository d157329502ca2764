"""The Community Notes scorer and its file I/O: scoring, scoring_explain, scoring_tsv,
communitynotes_io, pgcopy, synthetic."""
