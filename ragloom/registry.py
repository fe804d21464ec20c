"""One named-class registry for every pluggable family: chunkers, retrieval strategies, query transforms and
generation strategies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from ragloom.errors import ConfigError, RagloomError

T = TypeVar("T", bound=type)


class Registry(Generic[T]):
    """name -> subclass of ``base``; a name can be taken once, and the class learns its name. Mistakes raise
    ``error``, the family's own error type."""

    def __init__(self, kind: str, base: type, error: type[RagloomError] = ConfigError) -> None:
        self.kind, self.base, self.error = kind, base, error
        self._classes: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def register(cls: T) -> T:
            if not (isinstance(cls, type) and issubclass(cls, self.base)):
                raise self.error(f"{self.kind} {name!r}: {cls!r} is not a {self.base.__name__} subclass")
            if not name or not isinstance(name, str):
                raise self.error(f"{self.kind} name must be a non-empty string, got {name!r}")
            if name in self._classes:
                raise self.error(f"{self.kind} {name!r} is already registered ({self._classes[name].__qualname__})")
            cls.name = name
            self._classes[name] = cls
            return cls

        return register

    def names(self) -> list[str]:
        return sorted(self._classes)

    def get(self, name: str) -> T | None:
        return self._classes.get(name)

    def remove(self, name: str) -> None:
        """Forget ``name`` (for tests that register a class for their own duration)."""
        self._classes.pop(name, None)
