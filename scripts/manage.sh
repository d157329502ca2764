#!/usr/bin/env bash
# Run a manage.py command with the settings the demo's app runs with (var/demo.env, written by
# scripts/demo.sh: DEBUG=1, CROWDNOTES_EMBEDDED=1, its page server, its database and broker), so a command beside the demo
# needs nothing else set. A variable already set in your environment wins (the X credentials, which
# are never written to a file, come from there). Without var/demo.env: the environment as it is.
# Usage: scripts/manage.sh COMMAND [ARGS…]   e.g. scripts/manage.sh x_hydrate_posts --json
set -euo pipefail
cd "$(dirname "$0")/.."
env_file=${DEMO_ENV_FILE:-var/demo.env}
if [ -f "$env_file" ]; then
  while IFS='=' read -r name value; do
    case "$name" in '' | \#*) continue ;; esac
    if [ -z "${!name+set}" ]; then
      eval "export $name=$value"  # the value was written quoted for bash (shlex.quote)
    fi
  done <"$env_file"
fi
export DJANGO_SETTINGS_MODULE=${DJANGO_SETTINGS_MODULE:-crowdnotes_site.settings}
exec .venv/bin/python manage.py "$@"
