"""Dagster assets and asset checks, one module per stage."""
