#!/usr/bin/env bash
# Set up and run the full test suite on real PostgreSQL, Redis, Celery workers and headless Chromium.
# Usage: scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --dev
scripts/services.sh
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/crowdnotes}
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/15}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
exec .venv/bin/pytest "$@"
