"""Gathering concurrent single calls into batched calls: verl calls reward functions from many threads, a
model scores best in batches."""

from __future__ import annotations

import threading
from collections.abc import Callable


class MicroBatcher:
    """Gathers concurrent single calls into batched calls of ``run_batch``.

    A caller whose item is not done and who finds no batch running runs the next batch: up to
    ``max_batch`` waiting items (oldest first). Callers arriving meanwhile wait and form the next batch,
    so under verl's concurrent reward calls the model sees batches, and a lone caller runs at once (no
    timer). An exception from ``run_batch`` is raised in every caller of that batch.
    """

    def __init__(self, run_batch: Callable[[list], list], max_batch: int):
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        self._run_batch = run_batch
        self._max_batch = max_batch
        self._condition = threading.Condition()
        self._waiting: list[_Slot] = []
        self._busy = False

    def __call__(self, item):
        slot = _Slot(item)
        with self._condition:
            self._waiting.append(slot)
            while not slot.done:
                if self._busy:
                    self._condition.wait()
                    continue
                self._busy = True
                batch = self._waiting[: self._max_batch]
                del self._waiting[: self._max_batch]
                self._condition.release()
                try:
                    _fill(batch, self._run_batch)
                finally:
                    self._condition.acquire()
                    self._busy = False
                    self._condition.notify_all()
        if slot.error is not None:
            raise slot.error
        return slot.result


class _Slot:
    def __init__(self, item):
        self.item = item
        self.result = None
        self.error: BaseException | None = None
        self.done = False


def _fill(batch: list[_Slot], run_batch: Callable[[list], list]) -> None:
    try:
        results = run_batch([slot.item for slot in batch])
        if len(results) != len(batch):
            raise RuntimeError(f"a batch of {len(batch)} items gave {len(results)} results")
        for slot, result in zip(batch, results, strict=True):
            slot.result = result
    except BaseException as error:  # handed to every caller of the batch, who re-raises it
        for slot in batch:
            slot.error = error
    for slot in batch:
        slot.done = True
