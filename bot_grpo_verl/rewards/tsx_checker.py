"""The compile checker's client: :class:`TsxChecker` sends code to the shared long-lived Node worker
(``tsx/worker.mjs``, one per process, started on first use, restarted when it dies or hangs), which parses it with
esbuild and, at ``level="types"``, type-checks it with TypeScript (``checker="tsc7"``: the Go port in a process of
its own; ``"tsc6"``: in a thread of the worker). The code is never executed.
"""

from bot_grpo_verl.rewards.node_worker import WorkerClient, shared

# Share of ``timeout`` one TypeScript batch may run in the worker before its thread is replaced.
TYPE_TIMEOUT_SHARE = 1 / 3


class TsxChecker(WorkerClient):
    """The compile checker's client (``tsx/worker.mjs``): ``check`` / ``check_async`` send a batch of code
    strings and return the worker's answers in order. The worker bounds its own TypeScript batches
    (``timeout * TYPE_TIMEOUT_SHARE`` each) and answers a sample it cannot check with an error, which fails
    that sample alone; one that does not answer within ``timeout`` is killed (see :class:`WorkerClient`)."""

    name = "TSX worker"
    script_name = "worker.mjs"

    def requests(
        self,
        codes: list[str],
        level: str,
        elements: bool,
        max_diagnostics: int,
        timeout: float,
        outline: bool = False,
        checker: str = "tsc7",
    ) -> list[dict]:
        """The worker's requests for ``codes``: checked at ``level`` (``"syntax"`` or ``"types"``, by ``checker``),
        with the ranges of their JSX elements (``elements``) and their ``outline`` when asked, at most
        ``max_diagnostics`` diagnostics each, a type check bounded by ``timeout * TYPE_TIMEOUT_SHARE`` seconds."""
        return [
            {
                "code": code,
                "outline": outline,
                "level": level,
                "checker": checker,
                "elements": elements,
                "max_diagnostics": max_diagnostics,
                "type_timeout": timeout * TYPE_TIMEOUT_SHARE,
            }
            for code in codes
        ]

    def check(self, codes, level, elements, max_diagnostics, timeout, outline=False, checker="tsc7") -> list[dict]:
        """The worker's answers for ``codes`` (see :meth:`requests`), in order (with an ``outline`` of each code that
        passes, when asked), type-checked (``level="types"``) by ``checker``; raises :class:`CheckerError`."""
        return self.request(self.requests(codes, level, elements, max_diagnostics, timeout, outline, checker), timeout)

    async def check_async(
        self, codes, level, elements, max_diagnostics, timeout, outline=False, checker="tsc7"
    ) -> list[dict]:
        """:meth:`check` for an event loop: waits without blocking the loop."""
        requests = self.requests(codes, level, elements, max_diagnostics, timeout, outline, checker)
        return await self.request_async(requests, timeout)


shared_checker = shared(TsxChecker)
"""The process's shared :class:`TsxChecker` (a forked child gets its own)."""
