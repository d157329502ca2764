#!/usr/bin/env bash
# Set up and run CrowdNotes with demo data on embedded defaults (SQLite + filesystem broker, no servers needed).
# Starts the web app, a Celery worker, beat, and a loopback server with real evidence pages.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export DEBUG=${DEBUG:-1}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
PORT=${PORT:-8000}
PAGES_PORT=${PAGES_PORT:-8001}
# The fetcher may reach the demo's page server and nothing else on loopback (not the app itself).
export EVIDENCE_ALLOWED_LOCAL=${EVIDENCE_ALLOWED_LOCAL:-127.0.0.1:$PAGES_PORT} SITE_PORTS=${SITE_PORTS:-$PORT}
PY=.venv/bin/python
mkdir -p var/log
$PY manage.py migrate --noinput -v0
$PY manage.py load_demo
PAGES=../shared/data/webpages
# The local evidence index behind "Find evidence for me": the real pages of the corpus, with their
# original URLs and titles from the manifest; each proposal opens its copy served on $PAGES_PORT.
# First run ~2-3 min (extraction and chunking); later runs skip it (delete the marker to re-index).
if [ -d "$PAGES" ] && [ ! -f var/demo-index.done ]; then
  $PY manage.py index_documents "$PAGES" --manifest "$PAGES/manifest.tsv" --base-url "http://127.0.0.1:$PAGES_PORT/" \
    && touch var/demo-index.done
fi
# Unpack and load the embedding model and build its pre-filter table now (first run:
# about 1-2 min), so the first snippet does not wait for it; later runs find it in var/models.
$PY manage.py evidence_warmup

pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; }
trap cleanup EXIT INT TERM
$PY -m celery -A crowdnotes_site worker --pool=solo -Q default,cpu,llm -l INFO >var/log/worker.log 2>&1 &
pids+=($!)
$PY -m celery -A crowdnotes_site beat -s var/celerybeat-schedule -l INFO >var/log/beat.log 2>&1 &
pids+=($!)
if [ -d "$PAGES" ]; then
  $PY -m http.server "$PAGES_PORT" --bind 127.0.0.1 --directory "$PAGES" >var/log/pages.log 2>&1 &
  pids+=($!)
fi
cat <<MSG

CrowdNotes demo is starting at http://127.0.0.1:$PORT/
  logins (password crowdnotes-demo): demo-contributor, demo-rater, demo-admin
  evidence pages to paste: http://127.0.0.1:$PAGES_PORT/health/cdc.gov__about-sids.html (and the rest of $PAGES)
  or press "Find evidence for me": CrowdNotes searches its index of those pages (offline baseline without an LLM)
  logs: var/log/worker.log, var/log/beat.log   (Ctrl-C stops everything)

MSG
$PY manage.py runserver "127.0.0.1:$PORT"
