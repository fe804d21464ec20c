"""Shared test setup: no model hub, quiet tokenizers."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from collections.abc import Callable, Iterator  # noqa: E402

import pytest  # noqa: E402


def _chunker_registrar() -> Iterator[Callable[[str, type], type]]:
    """register(name, cls) for the duration of a fixture; the registry is restored afterwards, so a test's chunker
    never shows up in another test's list of registered chunkers."""
    from ragloom.chunking import base

    added: list[str] = []

    def register(name: str, cls: type) -> type:
        base.register_chunker(name)(cls)
        added.append(name)
        return cls

    yield register
    for name in added:
        base._REGISTRY.pop(name, None)


@pytest.fixture
def register_chunker_for_test() -> Iterator[Callable[[str, type], type]]:
    yield from _chunker_registrar()


@pytest.fixture(scope="module")
def register_chunker_for_module() -> Iterator[Callable[[str, type], type]]:
    yield from _chunker_registrar()
