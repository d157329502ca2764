#!/usr/bin/env bash
# Refresh the documentation's images (docs/images/) from the browser tests. A plain test run writes its
# screenshots to the git-ignored artifacts/ folder; with CROWDNOTES_DOCS_SCREENSHOTS=1 the shots the
# documentation shows go to docs/images/ instead (tests/support/screenshots.py). Review `git diff --stat
# docs/images` and commit the images you want. Usage: scripts/screenshots.sh [pytest args]
# (default: every browser test, tests/browser: heavy, several minutes; run it under `flock /tmp/heavy.lock`
# on a shared machine).
set -euo pipefail
cd "$(dirname "$0")/.."
export CROWDNOTES_DOCS_SCREENSHOTS=1
if [ "$#" -eq 0 ]; then set -- tests/browser; fi
exec scripts/test.sh "$@"
