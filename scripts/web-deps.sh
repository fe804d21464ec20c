#!/usr/bin/env bash
# Swagger UI's files for the service's /docs page, from the npm registry into the cache (once per version),
# so /docs works without a CDN. Needs the environment (scripts/env.sh) and npm; without npm /docs uses the CDN.
set -euo pipefail
python -m ragloom.service.docs || true
