"""The HealthNotes-style benchmark: `dataset` (read and validate the JSONL), `runner` (resumable
run of the modes over the rows, one JSONL record per row and mode), `table` (the study's table:
pure arithmetic over those records). Command: `manage.py run_benchmark`."""
