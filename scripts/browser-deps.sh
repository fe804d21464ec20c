#!/usr/bin/env bash
# Debian's Chromium for the UI test (Playwright drives it through executablePath; no browser download).
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "[ragloom] installing Debian's chromium for the UI test" >&2
  (apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }) \
    || echo "[ragloom] could not install chromium: the UI test will fail with that reason" >&2
else
  echo "[ragloom] chromium missing and not root: install chromium (or set RAGLOOM_CHROMIUM) for the UI test" >&2
fi
