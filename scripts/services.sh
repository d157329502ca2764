#!/usr/bin/env bash
# Make sure the local PostgreSQL and Redis used by tests (and a non-embedded run) are up.
set -euo pipefail
if ! pg_isready -h 127.0.0.1 -p 5432 -q; then
  echo "== starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -1)" main start
  for _ in $(seq 30); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done
fi
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  echo "== starting Redis"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/crowdnotes.log
  for _ in $(seq 30); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 1; done
fi
pg_isready -h 127.0.0.1 -p 5432 -q && redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null
DB=${CROWDNOTES_TEST_DB:-crowdnotes}
psql -h 127.0.0.1 -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname='$DB'" | grep -q 1 \
  || psql -h 127.0.0.1 -U postgres -qc "CREATE DATABASE $DB"
echo "== PostgreSQL and Redis are up"
