"""Head start: evidence ready before it is asked for. Services and selectors of `Prefetch`.

A URL typed into the contribute form (or the draft page's add-evidence form) is sent by a
debounced htmx POST; `prefetch_request` checks it without the network (evidence.fetch.precheck),
applies the per-contributor cap and rate, and queues `evidence.tasks.prefetch_url` once per URL.
The task (`prefetch_run`) runs fetch → extract → passages → passage embeddings through the same
code as a snippet (evidence.services.source_obtain, passages_embed), so the result lands in the
shared source cache; on submit the snippet finds every passage embedded and only embeds the post.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.cache import caches
from django.db import IntegrityError, transaction
from django.utils import timezone
from redis.exceptions import RedisError

from crowdnotes_site.queue import enqueue_on_commit
from evidence import fetch, pipeline, services
from evidence.errors import ExtractionError, FetchError, error_text
from evidence.models import Prefetch

if TYPE_CHECKING:
    from django.contrib.auth.models import User

PENDING = (Prefetch.State.QUEUED, Prefetch.State.RUNNING)
# A failed URL is not fetched again for this long, however often the field changes.
FAILED_HOLD = timedelta(seconds=60)

TEXTS = {
    Prefetch.State.QUEUED: "Queued: the page will be read shortly…",
    Prefetch.State.RUNNING: "Fetching and reading the page…",
    Prefetch.State.READY: "Ready: the page is read; on submit only the match with the post remains.",
}
CAPPED = "Not started: {n} of your links are already being read. It will be read when you submit."
LIMITED = "Not started: too many requests in the last minute. The links will be read when you submit."
PAUSED = "Not started: reading ahead is paused for a moment. The links will be read when you submit."


@dataclass(frozen=True)
class PrefetchStatus:
    url: str
    state: str  # a Prefetch.State, or "capped" / "limited" (nothing queued)
    text: str

    @property
    def pending(self) -> bool:
        return self.state in PENDING


def prefetch_prune(*, days: int) -> int:
    """Delete the finished head starts not touched for `days`. The pages they read stay in the
    shared source cache; a URL typed again later simply gets a new head start."""
    cutoff = timezone.now() - timedelta(days=days)
    finished = (Prefetch.State.READY, Prefetch.State.FAILED)
    deleted, _ = Prefetch.objects.filter(state__in=finished, updated_at__lt=cutoff).delete()
    return deleted


def _stale_before() -> datetime:
    # A pending row older than the hard task limit lost its worker: it no longer counts.
    return timezone.now() - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 30)


def _status(row: Prefetch) -> PrefetchStatus:
    if row.state == Prefetch.State.FAILED:
        return PrefetchStatus(row.url, row.state, error_text(row.error_code))
    return PrefetchStatus(row.url, row.state, TEXTS[Prefetch.State(row.state)])


def _is_pending(row: Prefetch) -> bool:
    return row.state in PENDING and row.updated_at >= _stale_before()


# --- Selectors ---------------------------------------------------------------------------------


ASKED_TTL_S = 3600  # how long a user's own head-start request is remembered for its status polls


def _asked_key(user_id: int, url_key: str) -> str:
    return f"prefetch:asked:{user_id}:{url_key}"


def _remember_asked(user: User, url_key: str) -> None:
    """Note that `user` asked for this URL's head start (their polls may then see its status)."""
    try:
        caches["default"].set(_asked_key(user.pk, url_key), 1, ASKED_TTL_S)
    except (RedisError, OSError):
        pass  # the row's requested_by still answers for the last requester


def _asked_by(user: User, url_keys: list[str]) -> set[str]:
    """The URL hashes among `url_keys` whose head start `user` asked for."""
    mine = set(Prefetch.objects.filter(url_hash__in=url_keys, requested_by=user).values_list("url_hash", flat=True))
    try:
        found = caches["default"].get_many([_asked_key(user.pk, k) for k in url_keys])
    except (RedisError, OSError):
        found = {}
    return mine | {k for k in url_keys if _asked_key(user.pk, k) in found}


def prefetch_statuses(*, user: User, urls: list[str]) -> list[PrefetchStatus]:
    """What the form shows for each URL whose head start `user` asked for (the others are left out:
    the answer never tells whether someone else has read a URL)."""
    label = services.configured_model_label()
    keys = _asked_by(user, [services.url_hash(u) for u in urls])
    rows = {row.url_hash: row for row in Prefetch.objects.filter(url_hash__in=keys)}
    statuses = []
    for url in urls:
        row = rows.get(services.url_hash(url))
        if row is not None and (
            row.state != Prefetch.State.READY or services.source_embedded(url=url, model_label=label)
        ):
            statuses.append(_status(row))
    return statuses


# --- Services ----------------------------------------------------------------------------------


def prefetch_limited(*, urls: list[str], paused: bool = False) -> list[PrefetchStatus]:
    """What the form shows when the request rate (crowdnotes_site.limits, group "prefetch") was hit,
    or (`paused`) when its counters are unreachable (Redis down: the group fails closed)."""
    text = PAUSED if paused else LIMITED
    return [PrefetchStatus(url, "limited", text) for url in urls[: settings.MAX_EVIDENCE_URLS]]


def prefetch_request(*, user: User, urls: list[str]) -> list[PrefetchStatus]:
    """Start a head start for each URL (at most MAX_EVIDENCE_URLS): one queued task per URL
    however often it is requested, none past the user's cap. Only about the user's own head starts
    does the answer say more than "Queued": a URL someone else read (or is reading) is answered as
    one nobody read, and read again for this user (from the shared cache, so quickly)."""
    return [_request_one(user=user, url=url) for url in urls[: settings.MAX_EVIDENCE_URLS]]


@transaction.atomic
def _request_one(*, user: User, url: str) -> PrefetchStatus:
    try:
        fetch.precheck(url, services.fetch_policy())
    except FetchError as exc:
        return PrefetchStatus(url, Prefetch.State.FAILED, error_text(exc.error_code))
    key = services.url_hash(url)
    row = Prefetch.objects.select_for_update().filter(url_hash=key).first()
    if key in _asked_by(user, [key]):  # this user's own head start: its status as it stands
        if row is not None and _is_pending(row):
            return _status(row)
        if services.source_embedded(url=url, model_label=services.configured_model_label()):
            return PrefetchStatus(url, Prefetch.State.READY, TEXTS[Prefetch.State.READY])
        if row is not None and row.state == Prefetch.State.FAILED and row.updated_at > timezone.now() - FAILED_HOLD:
            return _status(row)
    # Otherwise the answer is the one a URL nobody has read gets (cap, then "Queued"): whether someone
    # else read it, is reading it or failed to is not told. The head start is this user's own.
    mine = Prefetch.objects.filter(requested_by=user)
    pending = mine.filter(state__in=PENDING, updated_at__gte=_stale_before()).count()
    if pending >= settings.EVIDENCE_PREFETCH_MAX_PENDING:
        return PrefetchStatus(url, "capped", CAPPED.format(n=pending))
    _remember_asked(user, key)
    if row is not None and _is_pending(row):  # someone else's, on its way: it serves this user too
        return PrefetchStatus(url, Prefetch.State.QUEUED, TEXTS[Prefetch.State.QUEUED])
    now = timezone.now()
    if row is None:
        try:
            with transaction.atomic():
                row = Prefetch.objects.create(url=url, url_hash=key, requested_by=user, created_at=now, updated_at=now)
        except IntegrityError:  # another request queued it a moment ago: it serves this user too
            return PrefetchStatus(url, Prefetch.State.QUEUED, TEXTS[Prefetch.State.QUEUED])
    else:
        row.state, row.requested_by, row.updated_at = Prefetch.State.QUEUED, user, now
        row.error_code = row.error_message = ""
        row.save(update_fields=["state", "requested_by", "updated_at", "error_code", "error_message"])
    _enqueue(row.pk, user.pk)
    return _status(row)


def _enqueue(prefetch_id: int, owner: int | None) -> None:
    enqueue_on_commit("evidence.tasks.prefetch_url", prefetch_id, owner=owner)


def prefetch_claim(*, prefetch_id: int) -> bool:
    """queued → running, once (a message delivered twice does the work once)."""
    return bool(
        Prefetch.objects.filter(pk=prefetch_id, state=Prefetch.State.QUEUED).update(
            state=Prefetch.State.RUNNING, updated_at=timezone.now()
        )
    )


def prefetch_fail(*, prefetch_id: int, error_code: str, message: str, timings: dict[str, int] | None = None) -> None:
    Prefetch.objects.filter(pk=prefetch_id).update(
        state=Prefetch.State.FAILED,
        error_code=error_code,
        error_message=message[:2000],
        timings_ms=timings or {},
        updated_at=timezone.now(),
    )


def prefetch_run(*, prefetch_id: int) -> None:
    """Fetch, extract, chunk and embed every passage of the URL into the shared cache."""
    if not prefetch_claim(prefetch_id=prefetch_id):
        return
    row = Prefetch.objects.get(pk=prefetch_id)
    matcher = services.get_matcher()
    run = pipeline.PipelineResult()
    try:
        source = services.source_obtain(url=row.url, matcher=matcher, run=run, owner=row.requested_by_id)
    except (FetchError, ExtractionError) as exc:
        prefetch_fail(prefetch_id=prefetch_id, error_code=exc.error_code, message=exc.message, timings=run.timings_ms)
        return
    # At most one slice of passages per task (EVIDENCE_SLICE_PASSAGES, EVIDENCE_SLICE_SECONDS),
    # like the refine: a long document goes back to the queue between slices instead of holding
    # the CPU worker.
    computed, left = services.passages_embed(source=source, matcher=matcher, timings=run.timings_ms)
    timings = {**row.timings_ms, **run.timings_ms}
    timings["embedded"] = int(row.timings_ms.get("embedded", 0)) + computed
    timings["embed_passages"] = int(row.timings_ms.get("embed_passages", 0)) + run.timings_ms.get("embed_passages", 0)
    if left:
        with transaction.atomic():
            Prefetch.objects.filter(pk=prefetch_id).update(
                state=Prefetch.State.QUEUED, source=source, timings_ms=timings, updated_at=timezone.now()
            )
            _enqueue(prefetch_id, row.requested_by_id)
        return
    Prefetch.objects.filter(pk=prefetch_id).update(
        state=Prefetch.State.READY, source=source, timings_ms=timings, updated_at=timezone.now()
    )
