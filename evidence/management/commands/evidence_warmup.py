"""Unpack and load the embedding model and build its pre-filter table, so the first snippet is not slow."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from evidence import services
from evidence.matching import static_vectors


class Command(BaseCommand):
    help = "Prepare the configured embedding model (unpack, load, distil the pre-filter table) in MODEL_CACHE_DIR."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--model", default=None, help="defaults to EMBEDDING_MODEL")

    def handle(self, *args: Any, **options: Any) -> None:
        config = services.match_config(**({"model_name": options["model"]} if options["model"] else {}))
        matcher = services.get_matcher(config)
        table = static_vectors(matcher.model, config.model_name, config.cache_dir)
        self.stdout.write(
            f"{config.model_name}: ready in {config.cache_dir} (pre-filter table {table.shape[0]} tokens)"
        )
