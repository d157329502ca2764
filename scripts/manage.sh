#!/usr/bin/env bash
# Run a manage.py command with the settings the demo's app runs with (var/demo.env, written by
# scripts/demo.sh: DEBUG=1, CROWDNOTES_EMBEDDED=1, its page server, its database and broker), so a command beside the demo
# needs nothing else set. A variable already set in your environment wins (the X credentials, which
# are never written to a file, come from there). Without var/demo.env (the demo never ran here) it
# sets what the demo sets, where unset: DEBUG=1 and CROWDNOTES_EMBEDDED=1 (SQLite and the filesystem
# broker under var/), so a documented command such as research_download runs in a fresh checkout.
# A deployment runs `python manage.py` in the app's own environment instead (docs/operations/commands.md).
# Usage: scripts/manage.sh COMMAND [ARGS…]   e.g. scripts/manage.sh research_download FOLDER
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
elif [ -z "${DEBUG+set}" ] || [ -z "${CROWDNOTES_EMBEDDED+set}" ]; then
  echo "scripts/manage.sh: no $env_file (the demo has not run here): the demo's DEBUG=1 and CROWDNOTES_EMBEDDED=1 where unset" >&2
fi
export DEBUG=${DEBUG:-1} CROWDNOTES_EMBEDDED=${CROWDNOTES_EMBEDDED:-1}
export DJANGO_SETTINGS_MODULE=${DJANGO_SETTINGS_MODULE:-crowdnotes_site.settings}
exec .venv/bin/python manage.py "$@"
