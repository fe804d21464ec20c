"""Syncing the stores with the current chunk set: only new chunks are processed, removed ones withdrawn."""
