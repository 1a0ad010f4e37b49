"""Running a model's requests off the event loop, and dynamic batching: concurrent
requests whose inputs agree in everything but the first dimension are joined along it,
up to ``max_batch`` rows or until the oldest has waited ``timeout_s``, run as one session
call, and the outputs split back by each request's rows."""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Hashable

import numpy as np

from onnxrt.serve.errors import ServeError
from onnxrt.serve.metrics import ServeMetrics
from onnxrt.serve.model import ServedModel

__all__ = ["ModelRunner"]

log = logging.getLogger("onnxrt.serve")

Outputs = dict[str, np.ndarray]


@dataclass
class _Pending:
    feeds: dict[str, np.ndarray]
    rows: int
    key: Hashable
    future: asyncio.Future[Outputs]


class ModelRunner:
    """Runs one model version's requests on ``instances`` worker threads; with
    ``max_batch`` > 1 and a model whose inputs and outputs all have a free leading
    dimension, joins concurrent requests first."""

    def __init__(self, model: ServedModel, metrics: ServeMetrics, *, max_batch: int = 0,
                 timeout_s: float = 0.0, instances: int = 1) -> None:
        self.model = model
        self.max_batch = max_batch
        self.timeout_s = timeout_s
        self.instances = max(1, instances)
        self._executor = ThreadPoolExecutor(self.instances,
                                            thread_name_prefix=f"onnxrt-{model.name}")
        self._labels = (model.name, model.version)
        self._metrics = metrics
        self._pending: collections.deque[_Pending] = collections.deque()
        self._arrived: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        # set when a joined run's outputs did not follow the batch dimension
        self._outputs_unbatched = False

    @property
    def batching(self) -> bool:
        return self.max_batch > 1 and self.model.batchable and not self._outputs_unbatched

    async def run(self, feeds: dict[str, np.ndarray], outputs: list[str] | None = None
                  ) -> Outputs:
        """The outputs (all of them when batching, else those asked for)."""
        loop = asyncio.get_running_loop()
        if not self.batching:
            return await loop.run_in_executor(self._executor, self._run_one, feeds, outputs)
        if self._task is None or self._task.done():
            self._arrived = asyncio.Event()
            self._task = loop.create_task(self._collect())
        assert self._arrived is not None
        rows, key = self._signature(feeds)
        pending = _Pending(feeds, rows, key, loop.create_future())
        self._pending.append(pending)
        self._arrived.set()
        return await pending.future

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)

    # -- joining ---------------------------------------------------------------------

    def _signature(self, feeds: dict[str, np.ndarray]) -> tuple[int, Hashable]:
        """Rows and the key of requests this one can join; a request that can join none
        (no rows, more than max_batch, inputs disagreeing on the first dimension) gets a
        key of its own."""
        firsts = {a.shape[0] if a.ndim else -1 for a in feeds.values()}
        rows = next(iter(firsts)) if len(firsts) == 1 else -1
        if rows <= 0 or rows > self.max_batch:
            return max(rows, 0), object()
        return rows, tuple(sorted((n, a.dtype.str, a.shape[1:]) for n, a in feeds.items()))

    def _take(self, key: Hashable, batch: list[_Pending], rows: int) -> int:
        """Moves pending requests with ``key`` into ``batch`` while they fit."""
        kept: collections.deque[_Pending] = collections.deque()
        while self._pending:
            p = self._pending.popleft()
            if p.future.done():      # its client went away
                continue
            if p.key == key and rows + p.rows <= self.max_batch:
                batch.append(p)
                rows += p.rows
            else:
                kept.append(p)
        self._pending = kept
        return rows

    async def _collect(self) -> None:
        loop = asyncio.get_running_loop()
        slots = asyncio.Semaphore(self.instances)
        arrived = self._arrived
        assert arrived is not None
        while True:
            await slots.acquire()
            first = None
            while first is None:
                while not self._pending:
                    arrived.clear()
                    await arrived.wait()
                p = self._pending.popleft()
                first = None if p.future.done() else p
            batch, rows = [first], first.rows
            deadline = loop.time() + self.timeout_s
            while rows < self.max_batch and not self._outputs_unbatched:
                rows = self._take(first.key, batch, rows)
                remaining = deadline - loop.time()
                if rows >= self.max_batch or remaining <= 0:
                    break
                arrived.clear()
                try:
                    await asyncio.wait_for(arrived.wait(), remaining)
                except asyncio.TimeoutError:
                    rows = self._take(first.key, batch, rows)
                    break
            loop.create_task(self._execute(batch, slots))

    async def _execute(self, batch: list[_Pending], slots: asyncio.Semaphore) -> None:
        loop = asyncio.get_running_loop()
        try:
            results = await loop.run_in_executor(self._executor, self._run_batch,
                                                 [p.feeds for p in batch])
            for p, r in zip(batch, results):
                if p.future.done():
                    continue
                if isinstance(r, BaseException):
                    p.future.set_exception(r)
                else:
                    p.future.set_result(r)
        except BaseException as e:   # the executor shut down, or a fault of the server's
            for p in batch:
                if not p.future.done():
                    p.future.set_exception(ServeError(500, f"model '{self.model.name}': "
                                                           f"{type(e).__name__}: {e}"))
            if not isinstance(e, Exception):
                raise
        finally:
            slots.release()

    # -- in a worker thread ----------------------------------------------------------

    def _run_one(self, feeds: dict[str, np.ndarray], outputs: list[str] | None = None,
                 rows: int | None = None) -> Outputs:
        if rows is None:
            rows = _rows(feeds) if self.model.batchable else 1
        t = time.perf_counter()
        out = self.model.run(feeds, outputs)
        self._metrics.compute.labels(*self._labels).observe(time.perf_counter() - t)
        self._metrics.batch_size.labels(*self._labels).observe(rows)
        return out

    def _try_one(self, feeds: dict[str, np.ndarray]) -> Outputs | ServeError:
        try:
            return self._run_one(feeds)
        except ServeError as e:
            return e

    def _run_batch(self, feeds_list: list[dict[str, np.ndarray]]
                   ) -> list[Outputs | ServeError]:
        if len(feeds_list) == 1:
            return [self._try_one(feeds_list[0])]
        sizes = [_rows(f) for f in feeds_list]
        total = sum(sizes)
        joined = {n: np.concatenate([f[n] for f in feeds_list]) for n in feeds_list[0]}
        try:
            out = self._run_one(joined, rows=total)
        except ServeError:
            # one request's values can fail the whole batch: alone, only that one fails
            return [self._try_one(f) for f in feeds_list]
        if any(v.ndim == 0 or v.shape[0] != total for v in out.values()):
            # a free leading output dimension that does not follow the batch: never join
            # this model's requests again
            self._outputs_unbatched = True
            log.warning("model '%s' version %s: outputs do not follow the batch dimension "
                        "(%s for %d rows); its requests run one by one from now on",
                        self.model.name, self.model.version,
                        {n: list(v.shape) for n, v in out.items()}, total)
            return [self._try_one(f) for f in feeds_list]
        results: list[Outputs | ServeError] = []
        start = 0
        for n in sizes:
            results.append({k: v[start:start + n] for k, v in out.items()})
            start += n
        return results


def _rows(feeds: dict[str, Any]) -> int:
    return int(next(iter(feeds.values())).shape[0])
