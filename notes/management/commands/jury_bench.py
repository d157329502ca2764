from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from crowdnotes_site.lib.communitynotes.supernotes import evaluation, jury


class Command(BaseCommand):
    help = "Time PHM inference + rating sampling + projection for N candidates x J jurors."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--candidates", type=int, default=100)
        parser.add_argument("--jurors", type=int, default=200)
        parser.add_argument("--repeat", type=int, default=3)
        parser.add_argument("--ensemble", type=int, default=1, help="PHMs whose probabilities are averaged")
        parser.add_argument("--draws", type=int, default=jury.DEFAULT_DRAWS, help="jury draws per candidate")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        runs = [evaluation.bench(candidates=options["candidates"], jurors=options["jurors"], seed=i,
                                 members=options["ensemble"], draws=options["draws"])
                for i in range(options["repeat"])]  # fmt: skip
        best = min(runs, key=lambda r: r.seconds)
        if options["json"]:
            self.stdout.write(json.dumps(asdict(best)))
        else:
            self.stdout.write(f"{best.candidates} candidates x {best.jurors} jurors, {options['ensemble']} PHM(s), "
                              f"{options['draws']} draws: {best.seconds:.3f} s "
                              f"(best of {len(runs)}); embedding {best.embed_seconds:.3f} s")  # fmt: skip
