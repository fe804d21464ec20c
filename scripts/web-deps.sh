#!/usr/bin/env bash
# Browser files from the npm registry into the cache (once per version): Swagger UI for the service's /docs page,
# cytoscape, marked and DOMPurify for the playground's graph view and Markdown hits,
# so neither needs a CDN. Needs the environment (scripts/env.sh) and npm; without npm /docs uses the CDN and
# the playground draws a static graph.
set -euo pipefail
python -m ragloom.service.docs || true
