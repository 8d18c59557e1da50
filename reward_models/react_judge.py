"""A judge for React answers: any OpenAI-compatible chat endpoint (e.g. a code or vision model served by vLLM).

Two questions, each a rubric prompt with a strictly parsed answer:

- :meth:`JudgeClient.score`: does this component do what the request asks? The code (and, optionally, a
  screenshot of its render) in, a score ``SCORE: k`` with ``k`` in 0..10 out, returned as ``k / 10``.
- :meth:`JudgeClient.compare`: which of two components, shown as screenshots (or code), answers the request
  better? Asked in both orders (position bias cancels); returns A's win, 1, 0.5 or 0: the pairwise **win
  rate** of the paper's React evaluation.

The transport is :mod:`bot_grpo_verl.rewards.http_json` (``httpx``, shared with the PRM endpoint): at most
``concurrency`` requests in flight per client, each whole attempt within ``timeout_s``, retries (connection
errors, timeouts, 5xx, 408, 429, a malformed answer) until ``deadline_s``, answers cached by (model, prompt,
images). Every failure raises :class:`JudgeError` naming the endpoint.
"""

import base64
import collections
import hashlib
import json
import re
import threading
from dataclasses import dataclass

from bot_grpo_verl.rewards.http_json import EndpointError, JsonEndpoint, RequestRejected, Retries, Retryable

SCORE_LINE = re.compile(r"^\s*SCORE:\s*(\d{1,2})\s*$", re.MULTILINE)
CHOICE_LINE = re.compile(r"^\s*WINNER:\s*([AB])\s*$", re.MULTILINE)

SCORE_PROMPT = """You review a React component written for this request:

{request}

The component:

```tsx
{code}
```

Does the component do what the request asks (the requested component, props, elements, texts and behaviour)?
Give one line `SCORE: k`, k an integer from 0 (ignores the request) to 10 (does everything asked), and nothing
else on that line."""

COMPARE_PROMPT = """Two React components were written for this request:

{request}

{shown} Which one answers the request better? Answer with one line `WINNER: A` or `WINNER: B`."""


class JudgeError(EndpointError):
    """The judge endpoint did not answer usably; the message names it."""


class JudgeRejected(JudgeError, RequestRejected):
    """The judge endpoint refused the request (an HTTP 4xx that is not retried); ``status`` is the HTTP status."""


@dataclass(frozen=True)
class JudgeConfig:
    """Where and how to ask the judge.

    Parameters:
        endpoint (`str`): base URL of an OpenAI-compatible API, e.g. ``http://judge-host:8000/v1`` (the client
            posts to ``{endpoint}/chat/completions``).
        model (`str`): the served model name.
        timeout_s (`float`, *optional*, defaults to `60.0`): each attempt's deadline (connect, send, the whole answer).
        deadline_s (`float`, *optional*, defaults to `180.0`): no retry starts after this many seconds.
        concurrency (`int`, *optional*, defaults to `8`): requests in flight at once per client.
        cache_size (`int`, *optional*, defaults to `4096`): answers kept (least recently used dropped).
        temperature (`float`, *optional*, defaults to `0.0`): the judge's sampling temperature; above 0, repeated
            judgments of one response differ, and their spread is the judge's noise.
    """

    endpoint: str
    model: str
    timeout_s: float = 60.0
    deadline_s: float = 180.0
    concurrency: int = 8
    cache_size: int = 4096
    temperature: float = 0.0


class JudgeClient:
    """Thread-safe client of one judge endpoint (see the module docstring)."""

    def __init__(self, config: JudgeConfig):
        self.config = config
        self.url = config.endpoint.rstrip("/") + "/chat/completions"
        self.endpoint = JsonEndpoint(
            "judge",
            config.timeout_s,
            Retries(attempts=None, deadline_s=config.deadline_s, backoff_s=0.2, max_backoff_s=5.0),
            slots=threading.BoundedSemaphore(config.concurrency),
            error=JudgeError,
            rejected=JudgeRejected,
        )
        self.cache: collections.OrderedDict[str, str] = collections.OrderedDict()
        self.cache_lock = threading.Lock()

    def score(self, request: str, code: str, screenshot: bytes | None = None, sample: int = 0) -> float:
        """Whether ``code`` does what ``request`` asks, in [0, 1]; ``sample`` > 0 asks again (a new cache key:
        repeated judgments measure the judge's noise when its temperature is above 0)."""
        prompt = SCORE_PROMPT.format(request=request, code=code)
        text = self.ask(prompt, [screenshot] if screenshot else [], sample)
        found = SCORE_LINE.findall(text)
        if len(found) != 1 or not 0 <= int(found[0]) <= 10:
            raise JudgeError(f"judge {self.url} answered without exactly one `SCORE: 0..10` line: {text[:200]!r}")
        return int(found[0]) / 10

    def compare(self, request: str, first: bytes | str, second: bytes | str) -> float:
        """``first``'s win against ``second`` for ``request`` (1, 0.5 or 0), asked in both orders. Each is a
        screenshot (PNG bytes) or code (a string)."""
        forward = self._winner(request, first, second) == "A"
        backward = self._winner(request, second, first) == "B"
        return (forward + backward) / 2

    def _winner(self, request: str, a: bytes | str, b: bytes | str) -> str:
        images = [shown for shown in (a, b) if isinstance(shown, bytes)]
        if len(images) == 2:
            shown = "Component A is the first image, component B the second."
        else:
            shown = f"Component A:\n```tsx\n{a}\n```\n\nComponent B:\n```tsx\n{b}\n```\n"
            images = []
        text = self.ask(COMPARE_PROMPT.format(request=request, shown=shown), images, 0)
        found = CHOICE_LINE.findall(text)
        if len(found) != 1:
            raise JudgeError(f"judge {self.url} answered without exactly one `WINNER: A|B` line: {text[:200]!r}")
        return found[0]

    def ask(self, prompt: str, images: list[bytes], sample: int) -> str:
        """The judge's answer text to ``prompt`` with ``images`` (cached)."""
        digest = hashlib.sha256(json.dumps([self.config.model, prompt, sample]).encode())
        for image in images:
            digest.update(hashlib.sha256(image).digest())
        key = digest.hexdigest()
        with self.cache_lock:
            if key in self.cache:
                self.cache.move_to_end(key)
                return self.cache[key]
        content = [{"type": "text", "text": prompt}] + [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(image).decode()}}
            for image in images
        ]
        body = {
            "model": self.config.model,
            "messages": [{"role": "user", "content": content if images else prompt}],
            "temperature": self.config.temperature,
            "seed": sample,
        }
        text = self.endpoint.post(self.url, body, read=_content)
        with self.cache_lock:
            self.cache[key] = text
            while len(self.cache) > self.config.cache_size:
                self.cache.popitem(last=False)
        return text


def _content(answer) -> str:
    """The text of a chat completion; a malformed answer is retried."""
    try:
        return answer["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise Retryable(f"an answer without choices[0].message.content: {str(answer)[:200]!r}") from None
