"""/banners/: the site-wide banners (the demo's warm-up, the demo's benchmark run), which every
page polls while one shows, so a page left open loses its banner when the work is done.

The warm-up banner says what the warm-up is doing and how long that took when it last ran on
this machine, from the durations scripts/lib/warmup.sh measures and records per step (never a
guessed range: before the first measurement it says there is none)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from crowdnotes_site.access import PUBLIC, endpoint

# Written by scripts/lib/warmup.sh: one line per finished step (name, seconds, UTC end, exit status),
# appended on every start; and, while a step runs, its name and start (epoch seconds).
WARMUP_STEPS = "warmup-steps.tsv"
WARMUP_STEP = "warmup.step"

# What each step does, as the banner says it, and what it holds back meanwhile.
STEPS: dict[str, tuple[str, str]] = {
    "phm": ("training the Supernote jury's model", "Supernote runs wait for it"),
    "jury_real": ("training the jury on real posts (jury_pick)", ""),
    "helpfulness": (
        "training the helpfulness judge on the crowd's real verdicts",
        "the helpfulness stage uses the offline baseline until it is trained",
    ),
    "supernote": ("queuing the demo's Supernote run", ""),
    "living": ("the living-note demo (suggestions, a revision)", ""),
    "index": (
        "indexing the demo's evidence pages",
        '"Find evidence for me" finds only the pages indexed so far',
    ),
    "embedding": (
        "preparing the embedding model and building its pre-filter table",
        "evidence matching ranks passages by their words alone until the table is built",
    ),
}


def duration(seconds: float) -> str:
    """Seconds as the banner says them: "40 s" under two minutes, else "3.5 min"."""
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


@dataclass(frozen=True)
class StepTime:
    name: str
    label: str
    seconds: float

    @property
    def took(self) -> str:
        return duration(self.seconds)


@dataclass(frozen=True)
class WarmupProgress:
    """The running step (None between steps), how long it has run, how long it took the last time
    it ran here (None: never measured), and the last measured duration of every step."""

    step: str | None
    label: str
    holds_back: str
    running_seconds: float | None
    last_seconds: float | None
    measured: list[StepTime]

    @property
    def first_run(self) -> bool:
        return not self.measured

    @property
    def running_for(self) -> str:
        return duration(self.running_seconds) if self.running_seconds is not None else ""

    @property
    def took_last(self) -> str:
        return duration(self.last_seconds) if self.last_seconds is not None else ""


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def measured_steps(var_dir: Path) -> dict[str, float]:
    """The last measured seconds of each warm-up step on this install, by step name."""
    last: dict[str, float] = {}
    for line in _read(var_dir / WARMUP_STEPS).splitlines():
        fields = line.split("\t")
        # A step that failed is no measure of how long it takes.
        if len(fields) >= 2 and fields[0] in STEPS and fields[3:4] in ([], ["0"]):
            try:
                last[fields[0]] = float(fields[1])
            except ValueError:
                continue
    return last


def warmup_progress(var_dir: Path | None = None, *, now: float | None = None) -> WarmupProgress:
    """What the demo's warm-up is doing now and the measured durations of earlier runs."""
    folder = Path(var_dir or settings.VAR_DIR)
    last = measured_steps(folder)
    step: str | None = None
    running: float | None = None
    fields = _read(folder / WARMUP_STEP).strip().split("\t")
    if len(fields) == 2 and fields[0] in STEPS:
        try:
            running = max(0.0, (now or time.time()) - float(fields[1]))
            step = fields[0]
        except ValueError:
            step = None
    label, holds_back = STEPS[step] if step else ("", "")
    return WarmupProgress(
        step=step,
        label=label,
        holds_back=holds_back,
        running_seconds=running,
        last_seconds=last.get(step) if step else None,
        measured=[StepTime(name, STEPS[name][0], seconds) for name, seconds in last.items()],
    )


@endpoint(methods=["GET"], permission=PUBLIC)
def banners(request: HttpRequest) -> HttpResponse:
    return render(request, "_banners.html")
