"""The process's runtime state and its one reset.

State: values computed once per generation (``once``: the probe result, the selected
backend, the environment it was selected under). Caches (``Cache``: validated call
signatures, bound launches, compiled kernels, GEMM provider choices) are stamped with the
generation they were filled in. ``capturing()`` says whether the current stream is being
captured into a CUDA graph, for the launches that plan differently there. ``reset()`` bumps
the generation, which forgets the state and makes every cache empty at once;
``probe(refresh=True)``, ``reset_current_backend()``, registering a producer or a GEMM provider
(each change under ``changing()``), and changed launch heuristics all call it.
A value computed from the state of one generation is never filed under a later one.
"""

from __future__ import annotations

import threading
import weakref
from typing import Callable, Hashable, TypeVar

import torch

T = TypeVar("T")

_lock = threading.RLock()  # re-entrant: a value's factory may ask for another value (backend -> probe)
_generation = 0
_values: dict[str, object] = {}
_MISSING = object()


def _never_capturing() -> bool:
    return False


# Whether the current stream is being captured into a CUDA graph (never, with a torch built without CUDA). A
# bound call launches what costs the GPU least there (replays pay no host time) and what costs the host least
# in eager calls, with the same bits: the small-M GEMM's split-K plans, the per-token producer's split rows
capturing = torch.cuda.is_current_stream_capturing if torch.backends.cuda.is_built() else _never_capturing


def generation() -> int:
    """The current generation; take it before computing something a ``Cache`` will hold."""
    return _generation


def reset() -> None:
    """Forget the runtime state and every cache (the next call probes, selects and plans again)."""
    global _generation
    with _lock:
        _generation += 1
        _values.clear()
        for cache in _caches:
            cache._data.clear()


def changing() -> threading.RLock:
    """The lock a change of a registration table (producers, GEMM providers) holds from what it reads to the
    ``reset`` that ends it: changes run one at a time, each whole. The tables are copied, changed and put in place
    by one assignment per chain; a reader of several chains at once (a GEMM's provider order) holds it too."""
    return _lock


def once(name: str, factory: Callable[[], T]) -> T:
    """``factory()``, computed once per generation under the lock; a factory that raises stores nothing."""
    value = _values.get(name, _MISSING)
    if value is not _MISSING:
        return value  # type: ignore[return-value]
    with _lock:
        value = _values.get(name, _MISSING)
        if value is _MISSING:
            started = _generation
            value = factory()
            if started == _generation:  # a reset during the factory: the value is already stale
                _values[name] = value
    return value  # type: ignore[return-value]


def peek(name: str) -> object | None:
    """The state value ``name`` if it was computed in this generation, else None (computes nothing)."""
    value = _values.get(name, _MISSING)
    return None if value is _MISSING else value


class Cache:
    """A bounded map of values derived from the runtime state, emptied by every ``reset``.

    ``get`` takes no lock (hot path: one dict lookup). ``put`` files a value under the generation
    the caller read *before* computing it, and drops it when a reset has come since, so a value
    computed from old state never survives a reset.
    """

    __slots__ = ("name", "max_size", "_data", "__weakref__")

    def __init__(self, name: str, max_size: int = 4096):
        self.name, self.max_size = name, max_size
        self._data: dict = {}
        with _lock:
            _caches.add(self)

    def get(self, key: Hashable, default: object = None) -> object:
        return self._data.get(key, default)

    def put(self, key: Hashable, value: T, generation: int) -> T:
        with _lock:
            if generation == _generation:
                if len(self._data) >= self.max_size:
                    self._data.clear()
                self._data[key] = value
        return value

    def __len__(self) -> int:
        return len(self._data)


_caches: "weakref.WeakSet[Cache]" = weakref.WeakSet()
