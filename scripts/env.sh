#!/usr/bin/env bash
# Source me: makes (once) and activates the Python environment ragloom runs in.
#
# The environment lives outside the clone, under $RAGLOOM_CACHE_DIR/venvs/<hash of requirements.lock>,
# so fresh clones, CI and the demo reuse it; torch and its CUDA wheels are downloaded once into uv's
# cache. A changed lock file gives a new environment. The project itself is installed editable with
# --no-deps (a second), and PYTHONPATH names the checkout that sourced this file, so the `ragloom`
# command and every subprocess run that checkout's code.
#
# The strict shell options below hold while this file runs and are then put back as the caller had them, so
# an interactive shell that sources it does not start exiting on its first failing command.
_ragloom_restore="set +euo pipefail"
case $- in *e*) _ragloom_restore+="; set -e" ;; esac
case $- in *u*) _ragloom_restore+="; set -u" ;; esac
if shopt -qo pipefail; then _ragloom_restore+="; set -o pipefail"; fi
set -euo pipefail

RAGLOOM_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export RAGLOOM_REPO
RAGLOOM_CACHE_DIR="${RAGLOOM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ragloom}"
export RAGLOOM_CACHE_DIR
PY_VERSION="${RAGLOOM_PYTHON:-3.11}"

lock="$RAGLOOM_REPO/requirements.lock"
key="$(cat "$lock" "$RAGLOOM_REPO/scripts/env.sh" | sha256sum | cut -c1-16)"
venv="$RAGLOOM_CACHE_DIR/venvs/py${PY_VERSION}-$key"

log() { printf '[ragloom env] %s\n' "$*" >&2; }

ensure_uv() {
  if command -v uv >/dev/null 2>&1; then UV=uv; return; fi
  local boot="$RAGLOOM_CACHE_DIR/uv-bootstrap"
  if [ ! -x "$boot/bin/uv" ]; then
    log "installing uv into $boot"
    python3 -m venv "$boot"
    "$boot/bin/python" -m pip install -q uv || { log "could not install uv from PyPI: check network access to pypi.org"; return 1; }
  fi
  UV="$boot/bin/uv"
}

if [ ! -f "$venv/.complete" ]; then
  ensure_uv
  started=$(date +%s)
  log "creating $venv (first run on this machine, or requirements.lock changed)"
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  "$UV" venv -q -p "$PY_VERSION" "$venv" || { log "uv could not find Python $PY_VERSION: install it (pyenv install $PY_VERSION)"; eval "$_ragloom_restore"; return 1 2>/dev/null || exit 1; }
  "$UV" pip install -q -p "$venv/bin/python" -r "$lock"
  touch "$venv/.complete"
  log "environment ready in $(( $(date +%s) - started ))s"
fi

# Point the shared environment at this checkout (cheap, and safe to repeat).
if [ "$(cat "$venv/.ragloom-checkout" 2>/dev/null)" != "$RAGLOOM_REPO" ]; then
  ensure_uv
  "$UV" pip install -q -p "$venv/bin/python" --no-deps -e "$RAGLOOM_REPO"
  echo "$RAGLOOM_REPO" > "$venv/.ragloom-checkout"
fi

# The shared environment's editable install points at one checkout at a time; with several checkouts
# (worktrees, a CI clone) on one machine, PYTHONPATH makes each shell import the checkout it sourced.
export PYTHONPATH="$RAGLOOM_REPO${PYTHONPATH:+:$PYTHONPATH}"
export VIRTUAL_ENV="$venv"
export PATH="$venv/bin:$PATH"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1  # no model hub at run time
export TOKENIZERS_PARALLELISM=false

eval "$_ragloom_restore"
unset _ragloom_restore
