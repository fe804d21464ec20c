#!/usr/bin/env bash
# Debian's PostgreSQL and Redis servers for the cluster profile (tests/integration/test_cluster.py).
set -euo pipefail
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || command -v postgres >/dev/null 2>&1 || missing+=(postgresql)
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "[ragloom] installing Debian's ${missing[*]} for the cluster profile" >&2
  (apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q "${missing[@]}" >/dev/null; }) \
    || echo "[ragloom] could not install ${missing[*]}: the cluster tests will fail with that reason" >&2
else
  echo "[ragloom] ${missing[*]} missing and not root: install them for the cluster profile" >&2
fi
