#!/usr/bin/env bash
# Source me after env.sh: compiles the environment's Python modules (once per environment) and this checkout's.
#
# uv installs without compiling, and where PYTHONDONTWRITEBYTECODE is set (it is on our machines) Python never
# stores what it compiles on import either: every process compiled torch, transformers and dagster from source
# again, and the test suite starts dozens of them (Dagster webserver, daemon and run workers, Celery workers,
# benchmark scripts and their phases). `import dagster, torch, sentence_transformers, weaviate, neo4j` took 42 s
# that way on a busy 2-core machine, 12 s compiled. compileall writes the .pyc files whatever that variable says.
_site="$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
if [ ! -f "$VIRTUAL_ENV/.bytecode-compiled" ]; then
  printf '[ragloom env] compiling %s once (1-2 min)\n' "$_site" >&2
  # one file of torch's own test helpers is Python 3.12 syntax: compileall names it, goes on, and exits 1
  python -m compileall -q -j0 "$_site" >/dev/null 2>&1 || true
  touch "$VIRTUAL_ENV/.bytecode-compiled"
fi
# the checkout is small (seconds); a syntax error here is left for the import to report
python -m compileall -q -j0 "$RAGLOOM_REPO"/{ragloom,assets,resources,pipelines,benchmarks,tests} >/dev/null 2>&1 || true
unset _site
