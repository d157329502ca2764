#!/usr/bin/env bash
# Build the documentation site (docs/ + mkdocs.yml) strictly, then serve it at http://127.0.0.1:8002/
# with live reload. Usage: scripts/docs.sh [build]   (build: only build into var/site/ and stop)
# Port: DOCS_PORT (default 8002).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/mkdocs ] || scripts/setup.sh --dev
.venv/bin/mkdocs build --strict --site-dir var/site
[ "${1:-}" = build ] && { echo "Built: var/site/index.html"; exit 0; }
exec .venv/bin/mkdocs serve --strict -a "127.0.0.1:${DOCS_PORT:-8002}"
