"""Batching of concurrent ``generate`` calls for the ``hf_cpu`` rollout server.

verl's agent loop sends every request of a batch (``train_batch_size x rollout.n`` in training, the whole
validation set times ``val_kwargs.n`` in validation) concurrently. :class:`RequestBatcher` queues them and
runs :func:`~bot_grpo_verl.cpu.decoding.decode` in a worker thread (so the event loop keeps accepting
requests): the requests waiting when a batch starts are decoded together (up to ``max_batch_size``), those
that arrive meanwhile start the next batch, and each caller gets its completion as soon as its row
finishes. The loop stops when nothing is left; the next request starts a new one.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch

from bot_grpo_verl.cpu.decoding import Completion, DecodeStats, Request, decode
from bot_grpo_verl.cpu.sampling_params import SamplingParams


@dataclass(frozen=True)
class Waiter:
    """Where a request's completion goes: its future, on the event loop that awaits it."""

    future: asyncio.Future
    loop: asyncio.AbstractEventLoop

    def resolve(self, completion: Completion | None = None, error: BaseException | None = None) -> None:
        """Set the completion (or the error) from any thread, unless the caller gave up waiting."""

        def settle() -> None:
            if self.future.done():
                return
            if error is not None:
                self.future.set_exception(error)
            else:
                self.future.set_result(completion)

        self.loop.call_soon_threadsafe(settle)


class RequestBatcher:
    """Serves concurrent :meth:`generate` calls from batched decoding loops.

    Args:
        model: a ``transformers`` causal LM in eval mode.
        eos_token_ids: token ids that end a generation (unless ``ignore_eos``).
        pad_token_id: id used for left padding (masked out).
        max_batch_size: most rows decoded together (verl's ``rollout.max_num_seqs``); more requests wait
            for the next batch.
        seed: seed of the sampling generator.

    ``lock`` serialises the model between decoding and weight updates (:meth:`load_weights` waits for the
    loop to run out of requests). ``stats`` counts what every loop did
    (:class:`~bot_grpo_verl.cpu.decoding.DecodeStats`), updated step by step.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        eos_token_ids: Iterable[int],
        pad_token_id: int,
        max_batch_size: int = 256,
        seed: int = 0,
    ) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        self.model = model
        self.eos_token_ids = tuple(eos_token_ids)
        self.pad_token_id = pad_token_id
        self.max_batch_size = max_batch_size
        self.generator = torch.Generator().manual_seed(seed)
        self.lock = asyncio.Lock()
        self.stats = DecodeStats()
        self._waiting: deque[Request] = deque()
        self._in_flight: set[Waiter] = set()
        self._driver: asyncio.Task | None = None

    async def generate(self, prompt_ids: Sequence[int], params: SamplingParams) -> Completion:
        """Queue one request and wait for its completion; an empty prompt is refused here, before it could
        fail the rows it would join."""
        if len(prompt_ids) == 0:
            raise ValueError("hf_cpu rollout: empty prompt")
        loop = asyncio.get_running_loop()
        waiter = Waiter(loop.create_future(), loop)
        self._waiting.append(Request(list(prompt_ids), params, waiter))
        if self._driver is None or self._driver.done():
            self._driver = loop.create_task(self._drive())
        return await waiter.future

    async def _drive(self) -> None:
        """Run decoding loops while requests wait; a failed loop fails the requests it had taken."""
        async with self.lock:
            while self._waiting:
                try:
                    await asyncio.to_thread(
                        decode,
                        self.model,
                        self._admit,
                        self._deliver,
                        eos_token_ids=self.eos_token_ids,
                        pad_token_id=self.pad_token_id,
                        max_rows=self.max_batch_size,
                        generator=self.generator,
                        stats=self.stats,
                    )
                except Exception as error:  # hand the failure to every caller whose row was in flight
                    for waiter in self._in_flight:
                        waiter.resolve(error=error)
                    self._in_flight.clear()

    def _admit(self, rows: int) -> list[Request]:
        """Up to ``rows`` waiting requests, oldest first (called from the decoding thread)."""
        taken = [self._waiting.popleft() for _ in range(min(rows, len(self._waiting)))]
        self._in_flight.update(request.owner for request in taken)
        return taken

    def _deliver(self, waiter: Waiter, completion: Completion) -> None:
        self._in_flight.discard(waiter)
        waiter.resolve(completion)

    async def load_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> int:
        """Copy ``(name, tensor)`` pairs (HF names) into the model between decoding loops; return how many.

        A name the model does not have is an error (a silent skip would leave stale weights).
        """
        async with self.lock:
            state = self.model.state_dict()
            count = 0
            with torch.no_grad():
                for name, tensor in named_tensors:
                    if name not in state:
                        raise KeyError(f"hf_cpu rollout: the model has no weight named {name!r}")
                    if state[name].shape != tensor.shape:
                        raise ValueError(
                            f"hf_cpu rollout: weight {name!r} has shape {tuple(tensor.shape)}, "
                            f"the model expects {tuple(state[name].shape)}"
                        )
                    state[name].copy_(tensor)
                    count += 1
            return count
