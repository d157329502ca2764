"""`manage.py index_documents PATH [--manifest TSV]`: put documents in the local evidence index."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from evidence.index import services


class Command(BaseCommand):
    help = (
        "Ingest a folder of HTML/PDF/text files (or a text file of URLs, fetched through the safe fetcher) "
        "into the local evidence index; prints the count of each outcome."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("path", type=Path, help="a folder of documents, or a text file with one URL per line")
        parser.add_argument("--manifest", type=Path, help="TSV with local_file, url, title, category, language columns")
        parser.add_argument(
            "--base-url", default="", help="where the folder is served (e.g. http://127.0.0.1:8001/): copies open there"
        )
        parser.add_argument("--embed", action="store_true", help="also embed every passage now (for the rerank)")

    def handle(self, *args: Any, path: Path, manifest: Path | None, base_url: str, embed: bool, **options: Any) -> None:
        if not path.exists():
            raise CommandError(f"{path} does not exist")
        if manifest is not None and not manifest.is_file():
            raise CommandError(f"manifest {manifest} does not exist")
        try:
            if path.is_dir():
                outcomes = services.documents_index_folder(
                    folder=path, manifest=manifest, base_url=base_url, embed=embed
                )
            else:
                if manifest is not None:
                    raise CommandError("--manifest goes with a folder, not with a list of URLs")
                outcomes = services.documents_index_urls(url_file=path, embed=embed)
        except (ValueError, UnicodeDecodeError) as exc:
            raise CommandError(str(exc)) from exc
        for outcome, count in sorted(outcomes.items()):
            self.stdout.write(f"{outcome}: {count}")
        size, first, last = services.index_size()
        self.stdout.write(f"total: {sum(outcomes.values())} documents read; the index now holds {size}"
                          f" (published {first or '?'} to {last or '?'}; undated ones count too)")  # fmt: skip
