#!/usr/bin/env bash
# Set up and run CrowdNotes with demo data on embedded defaults (SQLite + filesystem broker, no servers needed).
# Starts the web app, two Celery workers (cpu queue; default + llm queues), beat, and a loopback
# server with real evidence pages. Ctrl-C or SIGTERM stops the script and everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
export DJANGO_SETTINGS_MODULE=${DJANGO_SETTINGS_MODULE:-crowdnotes_site.settings}
. scripts/lib/procs.sh
procs_trap
PORT=${PORT:-8000}
PAGES_PORT=${PAGES_PORT:-8001}
# Another program on a port would only show after set-up, when runserver fails: say so now.
for port in "$PORT" "$PAGES_PORT"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "Port $port on 127.0.0.1 is in use: start with free ports, e.g. PORT=8100 PAGES_PORT=8101 scripts/demo.sh" >&2
    exit 1
  fi
done
# Set-up (pip) only when .venv is missing or requirements/ or setup.sh changed since the last one: a
# restart does not reinstall (delete var/setup.sha256 to force it).
. scripts/lib/setup_stamp.sh
if setup_needed; then
  procs_run scripts/setup.sh
else
  echo "== .venv matches requirements/ (set-up skipped; delete var/setup.sha256 to rerun scripts/setup.sh)"
fi
export DEBUG=${DEBUG:-1}
# SQLite and the filesystem broker without DATABASE_URL / REDIS_URL, even with DEBUG=0.
export CROWDNOTES_EMBEDDED=${CROWDNOTES_EMBEDDED:-1}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export SCORING_INTERVAL_SECONDS=${SCORING_INTERVAL_SECONDS:-180}  # the demo rescoring every 3 minutes, so new ratings show
# The fetcher may reach the demo's page server and nothing else on loopback (not the app itself).
export EVIDENCE_ALLOWED_LOCAL=${EVIDENCE_ALLOWED_LOCAL:-127.0.0.1:$PAGES_PORT} SITE_PORTS=${SITE_PORTS:-$PORT}
PY=.venv/bin/python
mkdir -p var/log
procs_run $PY manage.py migrate --noinput -v0
procs_run $PY manage.py load_demo
# The shared data as the settings find it (next to the checkout, further up from a git worktree, or
# CROWDNOTES_SHARED_DATA): a fixed ../shared/data silently skipped the pages from a worktree.
PAGES=$($PY -c 'import django; django.setup(); from django.conf import settings; print(settings.SHARED_DATA_DIR / "webpages")')
# The served pages are copies of real pages: a copy pasted as evidence is cited, categorised and sent
# to X under its real address from the manifest (evidence/local_copies.py).
if [ -f "$PAGES/manifest.tsv" ]; then
  export EVIDENCE_LOCAL_COPIES_URL=${EVIDENCE_LOCAL_COPIES_URL:-http://127.0.0.1:$PAGES_PORT/}
  export EVIDENCE_LOCAL_COPIES_MANIFEST=${EVIDENCE_LOCAL_COPIES_MANIFEST:-$PAGES/manifest.tsv}
fi
# The settings this demo runs with, for commands run beside it (scripts/manage.sh reads them): every
# variable the settings read that is set here, no secrets (the X credentials stay in each shell's environment).
$PY scripts/lib/demo_env.py >var/demo.env
# Warm-up that serving pages does not need (the Supernote jury's model and the demo's Supernote run,
# the evidence index of the real pages, the embedding model and its pre-filter table: several minutes
# on a first run) starts after the app is up, in the background (scripts/lib/warmup.sh, log
# var/log/warmup.log); every page shows a banner while the marker var/warmup.running exists.
date -u +%H:%M >var/warmup.running
rm -f var/warmup.step  # a step a stopped warm-up left behind is not running

# CPU work (embedding, scoring) and I/O work (LLM calls, drafts, the outbox and the sweeper) get
# their own workers: an LLM answer or a refused connection is reported in seconds, not after the
# embedding work queued ahead of it.
procs_start var/log/worker-cpu.log $PY -m celery -A crowdnotes_site worker --pool=solo -Q cpu -n cpu@%h -l INFO
procs_start var/log/worker-llm.log $PY -m celery -A crowdnotes_site worker --pool=solo -Q default,llm -n llm@%h -l INFO
procs_start var/log/beat.log $PY -m celery -A crowdnotes_site beat -s var/celerybeat-schedule -l INFO
if [ -d "$PAGES" ]; then
  procs_start var/log/pages.log $PY -m http.server "$PAGES_PORT" --bind 127.0.0.1 --directory "$PAGES"
fi
procs_start var/log/warmup.log scripts/lib/warmup.sh "$PY" "$PAGES" "$PAGES_PORT"
procs_start var/log/web.log $PY manage.py runserver "127.0.0.1:$PORT"
web=${PROCS_PIDS[-1]}
echo "== starting the web app on http://127.0.0.1:$PORT/ (the banner below prints when its first page answers)"
web_started=$SECONDS
# Its log from now on (this run's only: procs_start emptied it).
tail -n +1 -f var/log/web.log &
PROCS_PIDS+=("$!")
if ! PROCS_TICK_S=1000000 procs_run $PY scripts/lib/wait_for_page.py "http://127.0.0.1:$PORT/" "$web"; then
  echo "The web app exited before answering: see var/log/web.log" >&2
  exit 1
fi
cat <<MSG

CrowdNotes demo is ready at http://127.0.0.1:$PORT/ (its first page answered $((SECONDS - web_started)) s after the web app started)
  logins (password crowdnotes-demo): demo-contributor, demo-rater, demo-admin;
    raters of the two simulated camps: demo-rater-a1, demo-rater-a2 (camp A), demo-rater-b1, demo-rater-b2 (camp B)
  evidence pages to paste: http://127.0.0.1:$PAGES_PORT/health/cdc.gov__about-sids.html (and the rest of $PAGES;
    a copy is cited under its real address, e.g. https://www.cdc.gov/…)
  or press "Find evidence for me": CrowdNotes searches its index of those pages (offline baseline without an LLM)
  warming up in the background (Supernote jury model and a Supernote run for the
    demo's stuck post, evidence index, embedding model; a banner shows until done): var/log/warmup.log
  logs: var/log/worker-cpu.log, var/log/worker-llm.log, var/log/beat.log, var/log/web.log
  commands with the demo's settings: scripts/manage.sh COMMAND … (e.g. scripts/manage.sh x_hydrate_posts --json)
  Ctrl-C (or SIGTERM to this script) stops everything it started.

MSG
wait "$web"  # returns at once on Ctrl-C/SIGTERM (the trap stops everything), or when the web server exits
