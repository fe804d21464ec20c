#!/usr/bin/env bash
# Source me: points DAGSTER_HOME at ragloom's data directory and installs the repo's dagster.yaml there.
RAGLOOM_DATA_DIR="${RAGLOOM_DATA_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/ragloom}"
export DAGSTER_HOME="${DAGSTER_HOME:-$RAGLOOM_DATA_DIR/dagster}"
mkdir -p "$DAGSTER_HOME"
cmp -s "$RAGLOOM_REPO/dagster.yaml" "$DAGSTER_HOME/dagster.yaml" || cp "$RAGLOOM_REPO/dagster.yaml" "$DAGSTER_HOME/dagster.yaml"
