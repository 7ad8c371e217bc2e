"""Work spread over forked CPU processes that inherit their inputs instead of pickling them."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

#: The function of the running :func:`fork_map` (set before the fork, read by the children).
_JOB: dict[str, Callable[[Any], Any]] = {}


def _call(item: Any) -> Any:
    return _JOB["fn"](item)


def fork_map(fn: Callable[[Any], Any], items: Iterable[Any], workers: int) -> Iterator[Any]:
    """``fn(item)`` for every item in ``min(workers, len(items))`` forked processes, yielded in
    ``items`` order; ``fn`` and what it refers to (models, tensors) are inherited by the fork,
    only the items and results are pickled. An exception in a worker is re-raised here."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    items = list(items)
    _JOB["fn"] = fn
    try:
        with ProcessPoolExecutor(min(workers, len(items)),
                                 mp_context=mp.get_context("fork")) as pool:
            yield from pool.map(_call, items)
    finally:
        _JOB.clear()
