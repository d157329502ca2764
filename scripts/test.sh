#!/usr/bin/env bash
# Set up and run the test suite on real PostgreSQL, Redis, Celery workers and headless Chromium,
# in TEST_WORKERS parallel processes (pytest-xdist; 2 by default), then print the 15 slowest tests.
# Without pytest args it first runs the SQLite lane: the tests that run on both databases (the page
# walk, the analytics figures) on the demo's embedded SQLite, with no server (tests/settings_sqlite.py).
# Usage: scripts/test.sh [--fast] [--serial] [pytest args]
#   --fast    the edit-run loop: every test but the browser and real-worker ones (-m "not browser and not worker")
#   --serial  one process, in file order (to debug an order or a parallel problem)
# Each checkout has its own test databases (test_<db>_<checkout hash>_gw0, ...) and each test process
# its own Redis database (the first from REDIS_URL's up that no other test process on this machine
# holds): see tests/settings.py. docs/architecture/tests.md has the lanes.
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
# The first Redis database a test process may claim (12 by default; 15 is the last).
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
# The tests that run on both databases: here on SQLite; the suite below runs them on PostgreSQL.
sqlite_lane=(tests/portable tests/notes/analytics/test_analytics_sql.py)
sqlite_status=0
if ((${#args[@]} == 0)); then
  echo "== the SQLite lane: ${sqlite_lane[*]} on the embedded database"
  .venv/bin/pytest -p no:xdist --ds tests.settings_sqlite "${sqlite_lane[@]}" || sqlite_status=$?
  echo "== the suite on PostgreSQL"
fi
# pytest's exit status is the script's (the suite's; else the SQLite lane's): 0 all passed, 1 some
# failed, 2 interrupted, 3 internal error, 4 usage error, 5 no test collected. Every one but 0
# fails CI (.ci/run runs under set -e).
.venv/bin/pytest "${options[@]}" "${args[@]}" || exit $?
exit "$sqlite_status"
