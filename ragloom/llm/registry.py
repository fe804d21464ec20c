"""One named-class registry for the LLM layer's families (query transforms, generation strategies)."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from ragloom.errors import ConfigError

T = TypeVar("T", bound=type)


class Registry(Generic[T]):
    """name -> subclass of ``base``; a name can be taken once, and the class learns its name."""

    def __init__(self, kind: str, base: type) -> None:
        self.kind, self.base, self._classes = kind, base, {}

    def register(self, name: str) -> Any:
        def register(cls: T) -> T:
            if not (isinstance(cls, type) and issubclass(cls, self.base)):
                raise ConfigError(f"{self.kind} {name!r}: {cls!r} is not a {self.base.__name__} subclass")
            if name in self._classes:
                raise ConfigError(f"{self.kind} {name!r} is already registered ({self._classes[name].__qualname__})")
            cls.name = name
            self._classes[name] = cls
            return cls

        return register

    def names(self) -> list[str]:
        return sorted(self._classes)

    def get(self, name: str) -> T | None:
        return self._classes.get(name)
