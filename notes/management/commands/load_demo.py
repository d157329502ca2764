from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db.models import Max
from django.utils import timezone

from judging.benchmark.queued import benchmark_queue
from notes.communitynotes.real_slice import real_slice_import
from notes.demo import (
    CAMP_RATERS,
    DEMO_CORPUS,
    DEMO_PASSWORD,
    DEMO_USERS,
    camp_of,
    demo_classify_posts,
    demo_date_verdicts,
    demo_judge_notes,
    demo_load,
    public_sample_imported,
)
from notes.living.demo import living_demo_lines
from notes.models import Note, Rating, ScoringRun
from notes.scoring.services import scoring_run_execute

CN_DATA = settings.SHARED_DATA_DIR / "communitynotes"
# The demo's posts and notes: posts written for the demo, notes written from the local copies of real
# pages (notes/demo_corpus.json). A CSV of scraped posts with their public notes may be given instead.
DEFAULT_SOURCE = DEMO_CORPUS
# The public samples imported beside the demo as what they are: real notes, ratings and status history.
PUBLIC_NOTES = CN_DATA / "colin-fraser/notes-00000.tsv"
PUBLIC_RATINGS = CN_DATA / "colin-fraser/ratings-00000.tsv"
PUBLIC_STATUS_HISTORY = CN_DATA / "mcroston/noteStatusHistory-00000.tsv"


def _scored_data() -> tuple[int, int, int | None]:
    """What the scorer reads, in brief: the notes and ratings there are (and the newest rating)."""
    return Note.objects.count(), Rating.objects.count(), Rating.objects.aggregate(last=Max("pk"))["last"]


class Command(BaseCommand):
    help = (
        "Load the demo: health posts written for the demo with notes written from local copies of real pages (or a CSV "
        "of public posts and notes), demo users, simulated raters; "
        "import the public samples as real imported data; classify posts; queue the judges on the demo notes; "
        "note requests, and a living note once a jury model is stored (demo_living)."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--source",
            type=Path,
            default=DEFAULT_SOURCE,
            help="the demo's posts and notes: demo_corpus.json (default) or a CSV of posts with notes",
        )
        parser.add_argument("--posts", type=int, default=25)
        parser.add_argument(
            "--no-public-sample",
            action="store_true",
            help="do not import the public notes/ratings/status-history samples (about 30 s on SQLite) nor the slice "
            "of real 2025 posts with their notes (COMMUNITYNOTES_REAL_DIR)",
        )
        parser.add_argument("--no-judging", action="store_true", help="do not queue the judges on the demo notes")
        parser.add_argument(
            "--no-living", action="store_true", help="no note requests, suggestions or revision (demo_living)"
        )
        parser.add_argument(
            "--no-benchmark", action="store_true", help="do not queue the benchmark on DEMO_BENCHMARK_DATASET"
        )

    def handle(self, *args: Any, source: Path, posts: int, **options: Any) -> None:
        if not source.exists():
            raise CommandError(f"Demo source not found: {source} (pass --source)")
        before = _scored_data()
        counts = demo_load(source=source, n_posts=posts)
        self.stdout.write(
            f"Demo loaded: {counts['posts']} new posts, {counts['notes']} new notes, {counts['ratings']} new ratings, "
            f"{counts['snippets']} new confirmed snippets (passages of the local copies of the pages the notes cite)."
        )
        if not options["no_public_sample"]:
            if public_sample_imported():
                self.stdout.write("Public Community Notes sample: already imported.")
            elif PUBLIC_NOTES.exists() and PUBLIC_RATINGS.exists():
                self.stdout.write(
                    f"Importing the public Community Notes sample (real data, labelled imported): {PUBLIC_NOTES.name}, "
                    f"{PUBLIC_RATINGS.name}, {PUBLIC_STATUS_HISTORY.name} …"
                )
                history = ["--status-history", str(PUBLIC_STATUS_HISTORY)] if PUBLIC_STATUS_HISTORY.exists() else []
                call_command(
                    "import_communitynotes",
                    "--notes",
                    str(PUBLIC_NOTES),
                    "--ratings",
                    str(PUBLIC_RATINGS),
                    *history,
                    stdout=self.stdout,
                    stderr=self.stderr,
                )
            else:
                self.stdout.write(f"Public Community Notes sample not found under {CN_DATA}: not imported.")
            self.stdout.write(real_slice_import(folder=settings.COMMUNITYNOTES_REAL_DIR).message)
        # A rerun that loaded nothing new leaves the statuses as scored (the schedule rescores): it adds
        # no scoring run, so loading the demo twice is loading it once.
        scored = ScoringRun.objects.filter(trigger=ScoringRun.Trigger.DEMO_LOAD, state=ScoringRun.State.DONE).exists()
        if scored and _scored_data() == before:
            self.stdout.write("Nothing new to score: the statuses of the demo's scoring run stand (/scoring/).")
        else:
            scoring_started = timezone.now()
            run = scoring_run_execute(run_id=ScoringRun.objects.create(trigger=ScoringRun.Trigger.DEMO_LOAD).pk)
            self.stdout.write(f"Scored the demo ratings (scoring run {run.pk}, shown on /scoring/): {run.summary}")
            redated = demo_date_verdicts(since=scoring_started)
            self.stdout.write(
                f"Dated {redated} demo status changes at their notes' last ratings (a status follows its ratings)."
            )
        topics = demo_classify_posts()
        self.stdout.write("Post topics: " + ", ".join(f"{k} {v}" for k, v in topics.items()))
        if not options["no_judging"]:
            queued, judged = demo_judge_notes()
            self.stdout.write(f"Judges queued on {queued} demo notes ({judged} judged already); the workers run them.")
        dataset = Path(settings.DEMO_BENCHMARK_DATASET) if settings.DEMO_BENCHMARK_DATASET else None
        if dataset is not None and dataset.is_file() and not options["no_benchmark"]:
            progress = benchmark_queue(dataset=dataset, modes=settings.BENCHMARK_DEMO_MODES)
            self.stdout.write(
                f"Benchmark on {dataset.name}: finished already (see /judging/benchmark/)."
                if progress is None
                else f"Benchmark on {dataset.name} queued ({progress.done} of {progress.total} tasks done; "
                "a worker runs it after the warm-up, /judging/benchmark/ shows its progress)."
            )
        if not options["no_living"]:
            for line in living_demo_lines(wait_for_jury=True):
                self.stdout.write(line)
        for username in DEMO_USERS:
            self.stdout.write(f"  login {username} / {DEMO_PASSWORD}")
        for username, index in CAMP_RATERS.items():
            self.stdout.write(
                f"  login {username} / {DEMO_PASSWORD}  (rater with the history of simulated camp {camp_of(index)})"
            )
