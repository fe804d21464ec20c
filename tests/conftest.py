"""Shared test setup: no model hub, quiet tokenizers, and the user's artifacts left alone."""

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def pytest_configure(config: pytest.Config) -> None:
    # run from a background job, the servers the tests start (Dagster's among them) would ignore SIGTERM
    from ragloom.stack.process import default_interrupts

    default_interrupts()


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
        base._REGISTRY.remove(name)


@pytest.fixture
def register_chunker_for_test() -> Iterator[Callable[[str, type], type]]:
    yield from _chunker_registrar()


@pytest.fixture(scope="module")
def register_chunker_for_module() -> Iterator[Callable[[str, type], type]]:
    yield from _chunker_registrar()


@pytest.fixture(scope="session", autouse=True)
def artifacts_outside_the_users_data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No test writes the user's artifacts (Parquet outputs, the embedding cache): RAGLOOM_ARTIFACTS_DIR points
    at a folder of this session, for the tests and the processes they start. Tests that need their own still
    set it. The embedding cache in it is the test runs' own, shared by every session (below)."""
    artifacts = tmp_path_factory.mktemp("artifacts")
    _shared_embedding_cache(artifacts)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAGLOOM_ARTIFACTS_DIR", str(artifacts))
        yield


def _shared_embedding_cache(artifacts: Path) -> None:
    """The session's embedding cache is a link to one kept across test runs under $RAGLOOM_CACHE_DIR (next to the
    ONNX exports): its vectors are keyed by model id and text hash, so a warm run embeds only texts no run has
    embedded (SciFact's abstracts are embedded by several fixtures and the evaluation smoke). Tests that count
    cache hits make their own cache."""
    from ragloom.settings import Settings

    shared = Settings.from_env().cache_dir / "test-embedding-cache"
    shared.mkdir(parents=True, exist_ok=True)
    (artifacts / "embedding_cache").symlink_to(shared, target_is_directory=True)
