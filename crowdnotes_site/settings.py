"""CrowdNotes settings: one module, everything read from the environment.

With no DATABASE_URL / REDIS_URL the app runs on embedded defaults (SQLite and a filesystem Celery
broker) so the demo needs no server; that is allowed only with DEBUG=1 or CROWDNOTES_EMBEDDED=1
(scripts/demo.sh sets it). Tests, CI and production set both URLs.
"""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from crowdnotes_site.env import env_bool, env_choice, env_float, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("CROWDNOTES_VAR_DIR", str(BASE_DIR / "var")))


def _find_shared_data() -> Path:
    """`../shared/data` next to the checkout, or further up (a git worktree sits one level deeper)."""
    for folder in BASE_DIR.parents:
        if (folder / "shared" / "data").is_dir():
            return folder / "shared" / "data"
    return BASE_DIR.parent / "shared" / "data"


# The real public data the demo, the classifier command and the benchmarks read by default.
SHARED_DATA_DIR = Path(env_str("CROWDNOTES_SHARED_DATA", str(_find_shared_data())))
# The real Community Notes folder (notes with text, final statuses; its README): `real_figures` and the
# demo's slice of real posts read it.
COMMUNITYNOTES_REAL_DIR = Path(env_str("COMMUNITYNOTES_REAL_DIR", str(SHARED_DATA_DIR / "communitynotes" / "real")))
# The outputs of `manage.py research_download` (FOLDER/research) shown on /analytics/research/;
# empty: the page says how to make them.
RESEARCH_OUTPUTS_DIR = env_str("RESEARCH_OUTPUTS_DIR", "")

DEBUG = env_bool("DEBUG", False)
# A fixed key is only acceptable for local DEBUG runs; production must provide one.
SECRET_KEY = env_str("SECRET_KEY", "dev-only-insecure-key-crowdnotes" if DEBUG else None)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django_htmx",
    "template_partials",
    "crowdnotes_site",
    "axes",
    "notes",
    "evidence",
    "judging",
    # Connect to X: a feature above notes; nothing imports it but urls and settings.
    "xnotes",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "crowdnotes_site.middleware.SecurityHeadersMiddleware",  # Permissions-Policy, no Server header
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "crowdnotes_site.logs.RequestIdMiddleware",
    # A view's dropped database connection or Redis error: a 503 page that explains (not a 500).
    "crowdnotes_site.middleware.OutageMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: it answers the login attempts of a locked-out client.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "crowdnotes_site.urls"
WSGI_APPLICATION = "crowdnotes_site.wsgi.application"
ASGI_APPLICATION = "crowdnotes_site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "crowdnotes_site.context_processors.site",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL", "")
# SQLite under VAR_DIR is for one machine (the demo, a DEBUG run); a deployment that forgot
# DATABASE_URL must not start writing its records into a local file.
CROWDNOTES_EMBEDDED = env_bool("CROWDNOTES_EMBEDDED", False)
if not DATABASE_URL and not (DEBUG or CROWDNOTES_EMBEDDED):
    raise ImproperlyConfigured(
        "Environment variable DATABASE_URL is required (e.g. postgres://user:password@host:5432/crowdnotes); "
        "to run on the embedded SQLite database in CROWDNOTES_VAR_DIR instead, set CROWDNOTES_EMBEDDED=1 "
        "(or DEBUG=1 for local development)."
    )
if DATABASE_URL:
    # Persistent connections are checked before their first use in each request, so a connection the
    # server dropped (restart, failover, pg_terminate_backend) is replaced instead of failing a request.
    DATABASES = {
        "default": dj_database_url.parse(
            DATABASE_URL,
            conn_max_age=env_int("DB_CONN_MAX_AGE", 60),
            conn_health_checks=env_bool("DB_CONN_HEALTH_CHECKS", True),
        )
    }
else:
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(VAR_DIR / "crowdnotes.sqlite3"),
            # SQLite is shared by the web process and the worker in the demo.
            "OPTIONS": {"timeout": 20, "transaction_mode": "IMMEDIATE"},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis, cache, Celery -------------------------------------------------------------
REDIS_URL = env_str("REDIS_URL", "")
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", REDIS_URL or "filesystem://")
# A request waits at most this long for Redis (cache, rate counters) before treating it as down.
REDIS_SOCKET_TIMEOUT_S = env_float("REDIS_SOCKET_TIMEOUT_S", 1.0)
_REDIS_OPTIONS = {"socket_connect_timeout": REDIS_SOCKET_TIMEOUT_S, "socket_timeout": REDIS_SOCKET_TIMEOUT_S}
# The default cache is what every process shares (the X request budget lives there): REDIS_URL, else
# the broker's Redis when the broker is Redis (workers may run on other machines), else (the demo, one
# machine, filesystem broker) a file cache under VAR_DIR. A per-process memory cache would keep what a
# worker learns where no page can read it.
_SHARED_REDIS = REDIS_URL or (CELERY_BROKER_URL if CELERY_BROKER_URL.startswith(("redis://", "rediss://")) else "")
_DEFAULT_CACHE: dict[str, Any] = (
    {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": _SHARED_REDIS, "OPTIONS": _REDIS_OPTIONS}
    if _SHARED_REDIS
    # MAX_ENTRIES: Django's file cache deletes a random third of its entries past 300, which could drop
    # the X budget's closed window; the demo stores far fewer than this.
    else {
        "BACKEND": "crowdnotes_site.filecache.LockedFileCache",
        "LOCATION": str(VAR_DIR / "cache"),
        "OPTIONS": {"MAX_ENTRIES": 100_000},
    }
)
if REDIS_URL:
    CACHES = {
        "default": _DEFAULT_CACHE,
        # Rate-limit counters, shared by every web worker (crowdnotes_site/limits.py).
        "limits": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "limits",
            "OPTIONS": _REDIS_OPTIONS,
        },
    }
else:
    # Without REDIS_URL the rate counters stay per process (one web process in the demo).
    CACHES = {
        "default": _DEFAULT_CACHE,
        "limits": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "limits"},
    }

# Timeouts nest so a stuck call is cut by the innermost one first:
# LLM client timeout < task soft limit < task hard limit < broker visibility timeout.
# Worst case of one judge stage: JUDGE_PARSE_ATTEMPTS x (LLM_MAX_RETRIES + 1) x LLM_TIMEOUT_S
# plus backoff = 2 x 3 x 30 s + 3 s = 183 s, inside the soft limit (judging/checks.py verifies).
LLM_TIMEOUT_S = env_float("LLM_TIMEOUT_S", 30.0)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 300)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 360)
CELERY_VISIBILITY_TIMEOUT = env_int("CELERY_VISIBILITY_TIMEOUT", 3600)
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
    "visibility_timeout": CELERY_VISIBILITY_TIMEOUT,
    # How often a worker looks for messages of lost workers (unacked past the visibility
    # timeout) and redelivers them; kombu's defaults, shortened by the worker-kill tests.
    "unacked_restore_interval": env_float("CELERY_UNACKED_RESTORE_INTERVAL_S", 10.0),
    "unacked_restore_throttle": env_int("CELERY_UNACKED_RESTORE_THROTTLE", 10, minimum=1),
}
if CELERY_BROKER_URL.startswith("filesystem://"):
    _broker_dir = VAR_DIR / "broker"
    for _sub in ("in", "processed", "control"):
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS.update(
        {
            "data_folder_in": str(_broker_dir / "in"),
            "data_folder_out": str(_broker_dir / "in"),
            "processed_folder": str(_broker_dir / "processed"),
            "control_folder": str(_broker_dir / "control"),  # kombu's default is ./control, in the checkout
            "store_processed": False,
        }
    )
# Fair ordering of the CPU queue (crowdnotes_site/queue.py): on Redis each priority is a list and
# workers take the lowest-numbered non-empty one first; a user's k-th message within the window
# gets priority k (capped at the last step). Other brokers ignore priorities (plain FIFO).
FAIR_QUEUE_PRIORITY_STEPS = 10
FAIR_QUEUE_WINDOW_S = env_int("FAIR_QUEUE_WINDOW_S", 900, minimum=1)
if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    CELERY_BROKER_TRANSPORT_OPTIONS.update(
        {"priority_steps": list(range(FAIR_QUEUE_PRIORITY_STEPS)), "queue_order_strategy": "priority"}
    )
CELERY_TASK_IGNORE_RESULT = True  # state lives in our own tables, not in a result backend
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "default"
# CPU-heavy model work and I/O-bound LLM calls get their own queues (and workers).
# Classify the health topic of every new post with text in a queued task (notes.services.post_create).
TOPICS_CLASSIFY_NEW_POSTS = env_bool("TOPICS_CLASSIFY_NEW_POSTS", True)
CELERY_TASK_ROUTES = {
    "evidence.tasks.*": {"queue": "cpu"},
    "notes.tasks.score_*": {"queue": "cpu"},
    # Topic of a new post: one LLM call (offline: a keyword count, no model loading).
    "notes.tasks.topic_*": {"queue": "llm"},
    "judging.tasks.train_*": {"queue": "cpu"},
    "judging.tasks.*": {"queue": "llm"},
    "notes.tasks.draft_*": {"queue": "llm"},
    "notes.tasks.supernote_*": {"queue": "llm"},
    "notes.tasks.revision_*": {"queue": "llm"},
    "notes.tasks.suggestion_*": {"queue": "llm"},
}
CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = {}
# Rescore every note from all ratings (notes.tasks.score_notes on the cpu queue).
CELERY_BEAT_SCHEDULE["score-notes"] = {
    "task": "notes.tasks.score_notes",
    "schedule": env_int("SCORING_INTERVAL_SECONDS", 3600),
}
# The rescoring's time limits (soft, then hard 60 s later). Sized for the whole public download
# on a busy site, where web requests come first and the rescoring gets what CPU is left, with room
# to spare (bench/README, "Page latency while the app rescores"). A lost worker is caught by the
# run's lease, not by this limit; a scheduled run that finds one running is skipped.
SCORING_SOFT_TIME_LIMIT_S = env_int("SCORING_SOFT_TIME_LIMIT_S", 3 * 3600, minimum=60)
# --- Living notes: requests, suggestions, revisions ---------------------------------------------
# A post with more than this many note requests gets a draft started automatically (evidence search
# and drafting, through the queue) for the requester whose request crossed it; 0 = never.
NOTE_REQUEST_AUTO_DRAFT_THRESHOLD = env_int("NOTE_REQUEST_AUTO_DRAFT_THRESHOLD", 0, minimum=0)
# A revision is drafted once a note has at least this many new suggestions and none came for
# REVISION_QUIET_SECONDS; it is published only if the judges pass it and the jury's predicted
# helpfulness (intercept) beats the current version's by REVISION_JURY_MARGIN.
REVISION_MIN_SUGGESTIONS = env_int("REVISION_MIN_SUGGESTIONS", 2, minimum=1)
REVISION_QUIET_SECONDS = env_int("REVISION_QUIET_SECONDS", 600, minimum=0)
REVISION_JURY_MARGIN = env_float("REVISION_JURY_MARGIN", 0.02)
REVISION_JURY_SIZE = env_int("REVISION_JURY_SIZE", 200, minimum=1)
REVISION_MAX_CLAIMS = env_int("REVISION_MAX_CLAIMS", 5, minimum=1)
SUGGESTION_MAX_CHARS = env_int("SUGGESTION_MAX_CHARS", 500, minimum=1)
# How often the beat looks for notes due a revision (0 = never: revisions only by `revisions_start_due`).
REVISION_CHECK_INTERVAL_SECONDS = env_int("REVISION_CHECK_INTERVAL_SECONDS", 60, minimum=0)
if REVISION_CHECK_INTERVAL_SECONDS:
    CELERY_BEAT_SCHEDULE["revisions-due"] = {
        "task": "notes.tasks.revisions_start_due",
        "schedule": REVISION_CHECK_INTERVAL_SECONDS,
    }
# --- Supernotes ------------------------------------------------------------------------------
SUPERNOTE_CANDIDATES = env_int("SUPERNOTE_CANDIDATES", 100, minimum=1)
SUPERNOTE_JURY_SIZE = env_int("SUPERNOTE_JURY_SIZE", 200, minimum=1)
# A fixed seed for every run (candidate subsets and jury draws) to reproduce one; 0 = a new one per run.
SUPERNOTE_SEED = env_int("SUPERNOTE_SEED", 0, minimum=0)
# Who may start a run (~300 LLM calls): admins; with this on, also the "Trusted contributor" group.
SUPERNOTES_OPEN_TO_TRUSTED = env_bool("SUPERNOTES_OPEN_TO_TRUSTED", False)
# A run is done in slices of this many candidates (about 3 LLM calls each), one task delivery per
# slice, re-queued in the starter's fair turn so other people's LLM work goes in between.
SUPERNOTE_SLICE_CANDIDATES = env_int("SUPERNOTE_SLICE_CANDIDATES", 5, minimum=1)
SUPERNOTE_MAX_CLAIMS = env_int("SUPERNOTE_MAX_CLAIMS", 5, minimum=1)  # deliveries of one slice (lost workers)
# Fetch every candidate link through evidence/fetch.py (off: only the well-formed check).
SUPERNOTE_CHECK_LINKS_REACHABLE = env_bool("SUPERNOTE_CHECK_LINKS_REACHABLE", False)
# Optional periodic job: a Supernote run for stuck posts without one (0 = off).
SUPERNOTE_INTERVAL_SECONDS = env_int("SUPERNOTE_INTERVAL_SECONDS", 0, minimum=0)
if SUPERNOTE_INTERVAL_SECONDS:
    CELERY_BEAT_SCHEDULE["supernote-stuck-posts"] = {
        "task": "notes.tasks.supernote_runs_start_stuck",
        "schedule": SUPERNOTE_INTERVAL_SECONDS,
    }
PHM_DIR = Path(env_str("PHM_DIR", str(VAR_DIR / "models" / "phm")))
# The jury's evaluation on the public sample, written by `evaluate_jury_sample --store` (offline)
# and only read by the Supernotes evaluation page.
JURY_EVALUATION_FILE = Path(env_str("JURY_EVALUATION_FILE", str(VAR_DIR / "jury-evaluation.json")))
# The jury trained on the real folder (`train_jury_real`; versions and LATEST) that `jury_pick` uses, and
# its evaluation on real posts (evaluation.json, written by `evaluate_jury --real --store`).
JURY_REAL_DIR = Path(env_str("JURY_REAL_DIR", str(VAR_DIR / "models" / "jury-real")))
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# --- Outbox, leases, sweeper (crowdnotes_site/queue.py, evidence/snippets.py, notes/services.py) ----
# A request tries the broker once after commit and gives up fast; the outbox keeps the task and
# the dispatcher (beat) delivers it when the broker is back. Never a 500, never a lost task.
CELERY_BROKER_CONNECTION_TIMEOUT = env_float("CELERY_BROKER_CONNECTION_TIMEOUT", 2.0)
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.5, "interval_max": 0.5}
CELERY_BROKER_TRANSPORT_OPTIONS.setdefault("socket_connect_timeout", 2)
OUTBOX_GRACE_S = env_int("OUTBOX_GRACE_S", 5, minimum=0)  # a fresh message is left to its on-commit attempt
OUTBOX_DISPATCH_INTERVAL_S = env_int("OUTBOX_DISPATCH_INTERVAL_S", 15, minimum=1)
CELERY_BEAT_SCHEDULE["outbox-dispatch"] = {
    "task": "crowdnotes_site.tasks.outbox_dispatch",
    "schedule": OUTBOX_DISPATCH_INTERVAL_S,
}
# Snippet processing and drafting hold a lease that a heartbeat thread renews every third of it;
# a lost worker's lease expires and the sweeper re-queues its work. Worst case from a SIGKILL to
# the work being queued again: WORK_LEASE_S + WORK_SWEEP_INTERVAL_S = 60 + 30 = 90 s (< 2 min).
WORK_LEASE_S = env_int("WORK_LEASE_S", 60, minimum=3)
WORK_SWEEP_INTERVAL_S = env_int("WORK_SWEEP_INTERVAL_S", 30, minimum=1)
CELERY_BEAT_SCHEDULE["work-sweep"] = {
    "task": "crowdnotes_site.tasks.work_sweep",
    "schedule": WORK_SWEEP_INTERVAL_S,
}
# Finished pre-flights and head starts (advice and caches, not records) are deleted after this.
FINISHED_WORK_RETENTION_DAYS = env_int("FINISHED_WORK_RETENTION_DAYS", 14, minimum=1)
CELERY_BEAT_SCHEDULE["prune-finished-work"] = {
    "task": "crowdnotes_site.tasks.prune_finished_work",
    "schedule": 6 * 3600,
}

# --- LLM (any OpenAI-compatible endpoint; unset = offline baselines) ----------------------
LLM_BASE_URL = env_str("LLM_BASE_URL", "")
LLM_API_KEY = env_str("LLM_API_KEY", "not-needed")
LLM_MODEL = env_str("LLM_MODEL", "gpt-4.1-mini")
LLM_MAX_RETRIES = env_int("LLM_MAX_RETRIES", 2, minimum=0)
LLM_BACKOFF_BASE_S = env_float("LLM_BACKOFF_BASE_S", 0.5)  # doubled per retry
LLM_BACKOFF_MAX_S = env_float("LLM_BACKOFF_MAX_S", 8.0)
# LLM calls per user per day (UTC) for the work a user started (judging their notes, pre-flights,
# drafts, "find evidence for me", Supernote runs); past it the work fails saying why. 0 = no limit.
LLM_DAILY_CALLS_PER_USER = env_int("LLM_DAILY_CALLS_PER_USER", 1000, minimum=0)
# Per-task model overrides: LLM_MODEL_DRAFT=..., LLM_MODEL_RELEVANCE=..., one variable per task.
LLM_TASK_MODELS = {
    name[len("LLM_MODEL_") :].lower(): value
    for name, value in os.environ.items()
    if name.startswith("LLM_MODEL_") and value
}

# --- Judges ---------------------------------------------------------------------------
# Per stage: auto (LLM when configured, else the trained classifier for helpfulness when one
# exists, else the offline baseline), llm, baseline, classifier (helpfulness only).
JUDGE_BACKEND_RELEVANCE = env_choice("JUDGE_BACKEND_RELEVANCE", "auto", ("auto", "llm", "baseline"))
JUDGE_BACKEND_CORRECTNESS = env_choice("JUDGE_BACKEND_CORRECTNESS", "auto", ("auto", "llm", "baseline"))
JUDGE_BACKEND_HELPFULNESS = env_choice("JUDGE_BACKEND_HELPFULNESS", "auto", ("auto", "llm", "baseline", "classifier"))
# Offline relevance: sentence-embedding cosine (loads the embedding model) or word overlap.
JUDGE_BASELINE_SIMILARITY = env_choice("JUDGE_BASELINE_SIMILARITY", "embedding", ("embedding", "lexical"))
JUDGE_PARSE_ATTEMPTS = env_int("JUDGE_PARSE_ATTEMPTS", 2, minimum=1)  # re-asks of an unparsable answer
JUDGE_TASK_MAX_RETRIES = env_int("JUDGE_TASK_MAX_RETRIES", 3, minimum=0)  # Celery retries on LLM outages
JUDGE_RETRY_BACKOFF_S = env_int("JUDGE_RETRY_BACKOFF_S", 30, minimum=0)  # doubled per retry
# A running stage is claimed for WORK_LEASE_S and its heartbeat renews the claim; a lost worker's
# run is re-queued by work_sweep (crowdnotes_site/leases.py).
JUDGE_MAX_CLAIMS = env_int("JUDGE_MAX_CLAIMS", 10, minimum=1)  # poison-message bound (worker deaths)
HELPFULNESS_CLASSIFIER_DIR = Path(env_str("HELPFULNESS_CLASSIFIER_DIR", str(VAR_DIR / "models" / "helpfulness")))
# `run_benchmark` writes each run to BENCHMARK_DIR/<dataset name> by default; the results page reads the latest.
BENCHMARK_DIR = Path(env_str("BENCHMARK_DIR", str(VAR_DIR / "benchmark")))
# `load_demo` queues the benchmark on this dataset (empty: not at all); a worker runs it in slices of
# BENCHMARK_SLICE_TASKS (row, mode) tasks behind people's work, and retries every BENCHMARK_WAIT_S
# seconds while the demo's warm-up is still indexing the pages its automation mode searches.
DEMO_BENCHMARK_DATASET = os.environ.get("DEMO_BENCHMARK_DATASET", str(BASE_DIR / "bench" / "benchmark_demo.jsonl"))
BENCHMARK_SLICE_TASKS = env_int("BENCHMARK_SLICE_TASKS", 2, minimum=1)
BENCHMARK_WAIT_S = env_int("BENCHMARK_WAIT_S", 30, minimum=1)
BENCHMARK_DEMO_MODES = ("human", "augmentation", "automation")

# --- Evidence -------------------------------------------------------------------------
EMBEDDING_MODEL = env_choice("EMBEDDING_MODEL", "all-mpnet-base-v2", ("all-mpnet-base-v2", "all-MiniLM-L6-v2"))
# The torch device the embedding model loads on (evidence/embedding.py): "cpu", or "cuda" /
# "cuda:N" / "mps" for a cpu-queue worker on a machine with a GPU (set it in that worker's env).
EMBEDDING_DEVICE = env_str("EMBEDDING_DEVICE", "cpu")
if not re.fullmatch(r"cpu|mps|cuda(:\d+)?", EMBEDDING_DEVICE):
    raise ImproperlyConfigured(f"EMBEDDING_DEVICE must be cpu, cuda, cuda:N or mps, not {EMBEDDING_DEVICE!r}")
PASSAGE_TOKENS = env_int("PASSAGE_TOKENS", 512, minimum=16)
PASSAGE_OVERLAP = env_int("PASSAGE_OVERLAP", 128, minimum=0)
MAX_EVIDENCE_URLS = env_int("MAX_EVIDENCE_URLS", 5, minimum=1)
# Loopback/private addresses the fetcher may reach, as explicit host:port pairs (IP or localhost),
# e.g. "127.0.0.1:8001" for the demo's page server; empty in production. Never these ports on a
# non-public address, listed or not: the app's own (SITE_PORTS), the database's and Redis'.
EVIDENCE_ALLOWED_LOCAL = env_list("EVIDENCE_ALLOWED_LOCAL", [])
SITE_PORTS = [int(port) for port in env_list("SITE_PORTS", ["8000"])]
# Local copies of real pages (evidence/local_copies.py; the demo serves the shared corpus): where they
# are served and the manifest that names each one's original URL. A copy is fetched from there but
# shown, categorised and sent to X under its original address. Both empty: off.
EVIDENCE_LOCAL_COPIES_URL = env_str("EVIDENCE_LOCAL_COPIES_URL", "")
EVIDENCE_LOCAL_COPIES_MANIFEST = env_str("EVIDENCE_LOCAL_COPIES_MANIFEST", "")
# Whether SITE_PORTS was set: unset, the app's real port is unknown (8000 is a guess), so a
# non-empty EVIDENCE_ALLOWED_LOCAL is refused at start-up (evidence/checks.py, evidence.E003).
SITE_PORTS_SET = bool(os.environ.get("SITE_PORTS", "").strip())


def _url_port(url: str, default: int) -> int | None:
    if not url or "://" not in url or url.startswith("filesystem://"):
        return None
    try:
        return urlsplit(url).port or default
    except ValueError:
        return None


EVIDENCE_NEVER_LOCAL_PORTS = sorted(
    {
        *SITE_PORTS,
        *(port for port in (_url_port(DATABASE_URL, 5432), _url_port(REDIS_URL, 6379)) if port),
        *(port for port in (_url_port(CELERY_BROKER_URL, 6379),) if port),
    }
)
MODEL_CACHE_DIR = Path(env_str("MODEL_CACHE_DIR", str(VAR_DIR / "models")))
# Safe fetching of evidence URLs (evidence/fetch.py) and matching (evidence/matching.py).
EVIDENCE_FETCH_TIMEOUT = env_float("EVIDENCE_FETCH_TIMEOUT", 15.0)  # total per URL, all hops and reads
EVIDENCE_MAX_BYTES = env_int("EVIDENCE_MAX_BYTES", 10 * 1024 * 1024, minimum=1024)
EVIDENCE_MAX_REDIRECTS = env_int("EVIDENCE_MAX_REDIRECTS", 3, minimum=0)
EVIDENCE_EXTRA_PORTS = [int(port) for port in env_list("EVIDENCE_EXTRA_PORTS", [])]  # besides 80 and 443
EVIDENCE_PROXY_URL = env_str("EVIDENCE_PROXY_URL", "")  # environment proxies are never used
EVIDENCE_MIN_WORDS = env_int("EVIDENCE_MIN_WORDS", 25, minimum=1)
# A URL fetched less than this long ago is served from the database (no fetch, no embedding).
EVIDENCE_CACHE_HOURS = env_int("EVIDENCE_CACHE_HOURS", 24, minimum=0)
# prefilter: embed only the top-k passages of a cheap ranking first (snippet ready fast), then
# EVIDENCE_REFINE embeds the rest in a follow-up task so scores end up exhaustive.
EVIDENCE_MATCH_STRATEGY = env_choice("EVIDENCE_MATCH_STRATEGY", "prefilter", ("prefilter", "exhaustive"))
EVIDENCE_PREFILTER_K = env_int("EVIDENCE_PREFILTER_K", 2, minimum=1)
EVIDENCE_REFINE = env_bool("EVIDENCE_REFINE", True)
# Relevance floor: the cosine of the post with a source's best passage (EMBEDDING_MODEL's scale)
# below which automation never proposes the source and a contributor's own source is marked
# "this page may not address the post" (not blocked). 0 turns both off. 0.42 for all-mpnet-base-v2:
# the middle of the gap, on the labelled set, between the highest candidate of the claims no page
# addresses and the lowest acceptable page (bench/README.md, "Find evidence for me").
EVIDENCE_RELEVANCE_FLOOR = env_float("EVIDENCE_RELEVANCE_FLOOR", 0.42)
# ... and a candidate is proposed only when its support (relevance + EVIDENCE_KEY_TERM_WEIGHT x
# the share of the claim's key terms the page contains) lies within this of the best screened
# candidate's (a page on the claim's topic is not proposed beside the page that answers it).
# Chosen on the labelled set (bench/README.md, "Find evidence for me"); a negative value turns the
# margin off.
EVIDENCE_RELEVANCE_MARGIN = env_float("EVIDENCE_RELEVANCE_MARGIN", 0.05)
EVIDENCE_KEY_TERM_WEIGHT = env_float("EVIDENCE_KEY_TERM_WEIGHT", 0.15)
# The refine runs in slices of at most this many passages, each its own task queued at the back
# (in the contributor's fair turn), so a long document never holds a CPU worker for minutes.
EVIDENCE_SLICE_PASSAGES = env_int("EVIDENCE_SLICE_PASSAGES", 32, minimum=1)
# A slice also ends once it has worked for this many seconds (checked every EVIDENCE_SLICE_STEP
# passages; at least one step per slice), so the wait it imposes on the next user does not grow
# with a slower CPU or a loaded machine (32 mpnet passages alone can outlast the 30 s target on 2
# cores: bench/README.md, "Evidence: no head-of-line blocking"). 0: passages only.
EVIDENCE_SLICE_SECONDS = env_float("EVIDENCE_SLICE_SECONDS", 10.0)
EVIDENCE_SLICE_STEP = env_int("EVIDENCE_SLICE_STEP", 4, minimum=1)
# 0: the refine embeds every passage (exhaustive); K > 0: only the pre-rank's top K of a document.
EVIDENCE_REFINE_TOP_K = env_int("EVIDENCE_REFINE_TOP_K", 0, minimum=0)
EVIDENCE_FETCH_RETRIES = env_int("EVIDENCE_FETCH_RETRIES", 2, minimum=0)  # transient network errors only
EVIDENCE_RETRY_BACKOFF = env_float("EVIDENCE_RETRY_BACKOFF", 5.0)  # seconds, doubled per retry
# Head start (evidence.prefetch): a URL typed into the contribute form is fetched and its passages
# embedded before submit; at most this many pending at once per contributor (request rate: RATE_LIMITS).
EVIDENCE_PREFETCH_MAX_PENDING = env_int("EVIDENCE_PREFETCH_MAX_PENDING", 5, minimum=1)

# --- Auth -----------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# The client address behind reverse proxies (crowdnotes_site/clientip.py): the number of proxies
# in front of the app that append to X-Forwarded-For (nginx alone: 1). 0 = reached directly, the
# header is ignored. Every per-address limit and the login lockout key on this address.
TRUSTED_PROXY_COUNT = env_int("TRUSTED_PROXY_COUNT", 0, minimum=0)
# Login lockout (django-axes, crowdnotes_site/lockout.py): after AXES_FAILURE_LIMIT wrong passwords
# for one username from one client address, that pair is refused (429 page) for AXES_COOLOFF_MINUTES,
# even with the right password; AXES_USERNAME_FAILURE_LIMIT wrong passwords for one username from all
# clients together lock it for everyone. Its state is in the database (not the cache): log-in works
# while Redis is down.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    # The model permissions in one query instead of two; ModelBackend then answers from its set.
    "crowdnotes_site.permissions.OneQueryPermissionsBackend",
    "django.contrib.auth.backends.ModelBackend",
    # notes.add_supernoterun for the "Trusted contributor" group when SUPERNOTES_OPEN_TO_TRUSTED=1.
    "notes.auth.TrustedContributorBackend",
]
AXES_HANDLER = "crowdnotes_site.lockout.PairAndUsernameHandler"
AXES_CLIENT_IP_CALLABLE = "crowdnotes_site.clientip.client_ip"
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 10, minimum=1)
AXES_USERNAME_FAILURE_LIMIT = env_int("AXES_USERNAME_FAILURE_LIMIT", 100, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("AXES_COOLOFF_MINUTES", 30, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
# A locked client's further attempts are not counted, so one client adds at most AXES_FAILURE_LIMIT
# to a username's global count (and cannot extend its own lockout by hammering).
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_VERBOSE = False
# Request rates (crowdnotes_site/limits.py, sliding windows, "count/period" with period s, m, h or d), per signed-in user or
# per IP address for anonymous visitors; only POSTs count. Past a rate: a 429 page that says so.
RATE_LIMITS = {
    "login": env_str("RATE_LIMIT_LOGIN", "30/m"),
    "signup": env_str("RATE_LIMIT_SIGNUP", "10/h"),
    "contribute": env_str("RATE_LIMIT_CONTRIBUTE", "20/h"),
    "evidence": env_str("RATE_LIMIT_EVIDENCE", "30/h"),
    "draft": env_str("RATE_LIMIT_DRAFT", "30/h"),
    "preflight": env_str("RATE_LIMIT_PREFLIGHT", "30/h"),
    "rating": env_str("RATE_LIMIT_RATING", "300/h"),
    # Ratings that carry a suggestion (each may fetch a source and ask the LLM for its kind).
    "suggestion": env_str("RATE_LIMIT_SUGGESTION", "30/h"),
    "note_request": env_str("RATE_LIMIT_NOTE_REQUEST", "30/h"),
    # The URL field's debounced head-start requests (evidence.prefetch): one per typing pause.
    "prefetch": env_str("RATE_LIMIT_PREFETCH", "60/m"),
    # Supernote runs (~300 LLM calls each): per user, and for the whole site (all users together).
    "supernote": env_str("RATE_LIMIT_SUPERNOTE", "3/h"),
    "supernote_site": env_str("RATE_LIMIT_SUPERNOTE_SITE", "10/h"),
    # "Retry" on a failed evidence page (each re-queues a fetch on the CPU queue).
    "retry": env_str("RATE_LIMIT_RETRY", "20/h"),
    # "Write a note" on a fetched X post (each opens a draft).
    "x_write": env_str("RATE_LIMIT_X_WRITE", "20/h"),
}
# Evidence pages one contributor may have waiting for the CPU queue (queued or being matched) at
# once; a contribution or an addition past it is refused with a form error.
MAX_QUEUED_EVIDENCE_PER_USER = env_int("MAX_QUEUED_EVIDENCE_PER_USER", 10, minimum=1)

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

# --- Security (production defaults; DEBUG relaxes what needs HTTPS) ------------------------
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SESSION_COOKIE_SECURE = not DEBUG
CSRF_COOKIE_SECURE = not DEBUG
# No script reads the CSRF cookie: forms carry {% csrf_token %} and htmx sends the token from the
# page (<body hx-headers> in base.html), so the cookie can be hidden from JavaScript.
CSRF_COOKIE_HTTPONLY = True
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy (django-csp): scripts and styles only from our own static files, no
# inline code (htmx's inline indicator styles are switched off in base.html), nothing framed.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}
SILENCED_SYSTEM_CHECKS = ["security.W021"] if not SECURE_HSTS_PRELOAD else []

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "context": {"()": "crowdnotes_site.logs.ContextFilter"},
        "client_errors": {"()": "crowdnotes_site.logs.ClientErrorFilter"},
    },
    "formatters": {"json": {"()": "crowdnotes_site.logs.JsonFormatter"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "filters": ["context", "client_errors"], "formatter": "json"}
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # Their DEBUG lines print OAuth headers (consumer key, access token): never below WARNING.
        "oauthlib": {"level": "WARNING"},
        "requests_oauthlib": {"level": "WARNING"},
    },
}

# --- Automation: "find evidence for me" (evidence/search, evidence/index) -------------------
# Backends, several at once: local (the local evidence index, offline), searxng, brave.
SEARCH_BACKENDS = env_list("SEARCH_BACKENDS", ["local"])
SEARCH_TAU = env_int("SEARCH_TAU", 3, minimum=1)  # sources proposed per run (the quota τ)
SEARCH_QUERY_COUNT = env_int("SEARCH_QUERY_COUNT", 5, minimum=1)
SEARCH_QUERY_TEMPERATURE = env_float("SEARCH_QUERY_TEMPERATURE", 0.7)
SEARCH_RESULTS_PER_QUERY = env_int("SEARCH_RESULTS_PER_QUERY", 8, minimum=1)
SEARCH_POOL_LIMIT = env_int("SEARCH_POOL_LIMIT", 40, minimum=1)
SEARCH_PICK_ATTEMPTS = env_int("SEARCH_PICK_ATTEMPTS", 2, minimum=1)  # LLM answers asked per round
# With a cutoff, documents without a known publication date are excluded (they could be newer)
# or included: "exclude" keeps the no-future-information promise of the benchmark.
SEARCH_UNDATED = env_choice("SEARCH_UNDATED", "exclude", ("exclude", "include"))
# Offline utility baseline: relevance (MiniLM cosine, or word overlap) + weight x prior(category).
SEARCH_BASELINE_SIMILARITY = env_choice("SEARCH_BASELINE_SIMILARITY", "embedding", ("embedding", "lexical"))
# The prior only breaks near-ties between candidates that cleared EVIDENCE_RELEVANCE_FLOOR: it
# moves a score by at most 0.05 x 1.0.
SEARCH_PRIOR_WEIGHT = env_float("SEARCH_PRIOR_WEIGHT", 0.05)
# Candidates whose best passage is checked against the floor (most promising first, 3 per task).
SEARCH_SCREEN_LIMIT = env_int("SEARCH_SCREEN_LIMIT", 8, minimum=1)
SEARCH_RELIABILITY_PRIOR = env_str("SEARCH_RELIABILITY_PRIOR", "")  # e.g. "social=0,news=0.6" over the defaults
SEARCH_LOCAL_RERANK = env_bool("SEARCH_LOCAL_RERANK", True)  # by stored passage embeddings
SEARCH_HTTP_TIMEOUT_S = env_float("SEARCH_HTTP_TIMEOUT_S", 10.0)
SEARCH_HTTP_RETRIES = env_int("SEARCH_HTTP_RETRIES", 2, minimum=0)  # on 429/503 and connection errors
SEARCH_HTTP_BACKOFF_S = env_float("SEARCH_HTTP_BACKOFF_S", 0.5)  # doubled per retry, Retry-After honoured
SEARXNG_URL = env_str("SEARXNG_URL", "")
BRAVE_API_KEY = env_str("BRAVE_API_KEY", "")
BRAVE_API_URL = env_str("BRAVE_API_URL", "https://api.search.brave.com/res/v1")
# An automation run's stage is claimed for WORK_LEASE_S, renewed by its heartbeat (crowdnotes_site/leases.py).
SEARCH_MAX_CLAIMS = env_int("SEARCH_MAX_CLAIMS", 30, minimum=1)
# Ask the LLM for the category of domains the rules do not know (kept in the admin's mapping table).
SOURCE_CATEGORY_LLM = env_bool("SOURCE_CATEGORY_LLM", False)

# --- X API (xnotes/: the Community Notes API as an AI Note Writer) ---------------------------
# Without the four OAuth 1.0a values the X features are off and the pages say how to turn them on.
# Secrets are read here only; they are never logged, shown or stored in the database.
X_API_BASE_URL = env_str("X_API_BASE_URL", "https://api.x.com").rstrip("/")
X_API_KEY = env_str("X_API_KEY", "")
X_API_KEY_SECRET = env_str("X_API_KEY_SECRET", "")
X_ACCESS_TOKEN = env_str("X_ACCESS_TOKEN", "")
X_ACCESS_TOKEN_SECRET = env_str("X_ACCESS_TOKEN_SECRET", "")
X_BEARER_TOKEN = env_str("X_BEARER_TOKEN", "")  # app-only: GET /2/tweets (else user context)
X_TEST_MODE = env_bool("X_TEST_MODE", True)  # live only when an admin sets it to false
X_API_TIMEOUT_S = env_float("X_API_TIMEOUT_S", 15.0)
X_API_MAX_RETRIES = env_int("X_API_MAX_RETRIES", 3, minimum=0)  # on 5xx and timeouts (never on POST /2/notes)
X_API_BACKOFF_S = env_float("X_API_BACKOFF_S", 1.0)  # doubled per retry
# The X commands' total wait for rate-limit resets (429s): past it they stop with an error naming
# X's answers instead of waiting on (default: one 15-minute window and a minute's margin).
X_API_MAX_TOTAL_WAIT_S = env_float("X_API_MAX_TOTAL_WAIT_S", 960.0)
# X's window (90 requests per 15 minutes across the Community Notes endpoints): the budget learns
# what is left from X's x-rate-limit-* headers and closes for this long when they give no reset.
# X allows 250 notes a day.
X_API_WINDOW_S = env_int("X_API_WINDOW_S", 900, minimum=1)
X_DAILY_NOTE_CAP = env_int("X_DAILY_NOTE_CAP", 250, minimum=0)
X_FETCH_MAX_RESULTS = env_int("X_FETCH_MAX_RESULTS", 100, minimum=1)
X_FETCH_PAGE_LIMIT = env_int("X_FETCH_PAGE_LIMIT", 10, minimum=1)  # pages per beat run
X_HYDRATE_BATCH_LIMIT = env_int("X_HYDRATE_BATCH_LIMIT", 1000, minimum=1)  # ids per beat run
X_NOT_FOUND_RETRY_DAYS = env_int("X_NOT_FOUND_RETRY_DAYS", 7, minimum=1)
X_FETCH_INTERVAL_S = env_int("X_FETCH_INTERVAL_S", 1800, minimum=0)  # 0 = no beat task
X_HYDRATE_INTERVAL_S = env_int("X_HYDRATE_INTERVAL_S", 3600, minimum=0)
X_SYNC_INTERVAL_S = env_int("X_SYNC_INTERVAL_S", 3600, minimum=0)
# The queue of the X tasks (a deployment may give X its own worker; the tests give theirs one).
X_TASK_QUEUE = env_str("X_TASK_QUEUE", "default")
CELERY_TASK_ROUTES["xnotes.tasks.*"] = {"queue": X_TASK_QUEUE}
for _name, _task, _every in (
    ("x-fetch-eligible", "xnotes.tasks.x_fetch_eligible", X_FETCH_INTERVAL_S),
    ("x-hydrate-posts", "xnotes.tasks.x_hydrate_posts", X_HYDRATE_INTERVAL_S),
    ("x-sync-written", "xnotes.tasks.x_sync_written", X_SYNC_INTERVAL_S),
):
    if _every:
        CELERY_BEAT_SCHEDULE[_name] = {"task": _task, "schedule": _every}
