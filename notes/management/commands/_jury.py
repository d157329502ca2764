"""What the jury's evaluation commands on real data share: the seeds to run and the text embedding."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from notes.supernotes.services import Embed, embedder


def add_seed_arguments(parser: CommandParser) -> None:
    parser.add_argument("--seed", type=int, default=None, help="one seed (instead of --seeds)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="the seeds")
    parser.add_argument("--per-post", action="store_true", help="--json: every held-out post (one seed: --seed S)")


def seeds_of(options: dict[str, Any]) -> list[int]:
    """--seed S alone, else --seeds; --per-post lists one seed's picks, so it needs one seed."""
    seeds = [options["seed"]] if options["seed"] is not None else options["seeds"]
    if options["per_post"] and len(seeds) != 1:
        raise CommandError("--per-post lists one seed's picks: give --seed S.")
    return list(seeds)


def embedder_or_error(name: str) -> Embed:
    try:
        return embedder(name)
    except Exception as exc:  # an unknown or missing model
        raise CommandError(f"Cannot load the embedder {name!r}: {exc}") from exc
