#!/usr/bin/env bash
# Set up and run the test suite on real PostgreSQL, Redis, Celery workers and headless Chromium,
# in TEST_WORKERS parallel processes (pytest-xdist; 2 by default), then print the 15 slowest tests.
# Usage: scripts/test.sh [--fast] [--serial] [pytest args]
#   --fast    the edit-run loop: every test but the browser and real-worker ones (-m "not browser and not worker")
#   --serial  one process, in file order (to debug an order or a parallel problem)
# Each parallel process has its own test database (test_<db>_gw0, ...) and Redis database (the
# REDIS_URL database + the process's index): see tests/settings.py. docs/architecture/tests.md has the lanes.
set -euo pipefail
cd "$(dirname "$0")/.."
lane=(-m "not browser and not worker")
args=()
parallel=1
fast=0
for arg in "$@"; do
  case "$arg" in
    --fast) fast=1 ;;
    --serial) parallel=0 ;;
    *) args+=("$arg") ;;
  esac
done
scripts/setup.sh --dev
scripts/services.sh
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/crowdnotes}
# The base Redis database: parallel process N uses base + N (12, 13, ... by default; 15 is the last).
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/12}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
options=()
if ((parallel)); then
  # loadgroup: tests marked xdist_group(name) run in one process, one after the other.
  options+=(-n "${TEST_WORKERS:-2}" --dist loadgroup)
fi
if ((fast)); then
  options+=("${lane[@]}")
fi
# pytest's exit status is the script's: 0 all passed, 1 some failed, 2 interrupted, 3 internal
# error, 4 usage error, 5 no test collected. Every one but 0 fails CI (.ci/run runs under set -e).
exec .venv/bin/pytest "${options[@]}" "${args[@]}"
