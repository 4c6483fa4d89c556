"""Sending one Provider's notifications: a bounded queue, sent in order by one task, each request retried.

A receiver that is down must cost the operator a bounded amount of memory and nothing else: the queue holds at
most ``limit`` notifications (the oldest are dropped, and counted, when more come); one task per Provider with
something queued sends them in order (a commit's pending status before its success), so a slow receiver delays
only its own queue, never a reconcile. Timeouts, connection errors, 429 and 5xx are retried with backoff (a
``Retry-After`` the receiver sends is honoured, up to the backoff's limit) for ``retry_for`` seconds; any other
answer is final.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urljoin, urlsplit

import aiohttp

from helmop.api.addresses import AddressRefused, Policy
from helmop.api.errors import describe
from helmop.api.settings import Backoff
from helmop.infra import addresses

from .payloads import Request

log = logging.getLogger(__name__)
_REDIRECTS = 5
_ANSWER = 64 << 10  # bytes of a receiver's answer read (an error's detail, Slack's "ok")


# the headers a redirect to another origin keeps: the others may be credentials (Authorization, PRIVATE-TOKEN,
# DD-API-KEY, a Secret's headers)
_PLAIN = {"content-type", "accept", "user-agent", "gotk-component", "x-github-api-version"}


class Undeliverable(Exception):
    """The notification was not delivered, and trying again would not help (or the retries ran out)."""


@dataclass(frozen=True)
class Connection:
    """How one delivery reaches its receiver: the TLS to use, a proxy, the time one request may take."""

    ssl: ssl.SSLContext | None = None
    proxy: str = ""
    proxy_auth: aiohttp.BasicAuth | None = None
    timeout: float = 15.0


class Sender:
    """Sends requests under an address policy, with retries; one HTTP client for every Provider."""

    def __init__(self, policy: Policy, backoff: Backoff, retry_for: float) -> None:
        self.policy = policy
        self.backoff = backoff
        self.retry_for = retry_for
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = addresses.session(self.policy, limit=50, ttl_dns_cache=0)
        return self._session

    async def send(self, request: Request, how: Connection, retrying: Callable[[], None] = lambda: None) -> str:
        """Deliver ``request``, retrying what may succeed later (``retrying`` called before each retry): the
        answer's text (at most ``request.reads`` bytes); Undeliverable when it cannot be."""
        started, attempt = time.monotonic(), 0
        while True:
            attempt += 1
            try:
                answer = await asyncio.wait_for(self._post(request, how), how.timeout)
            except TimeoutError:
                answer = _Answer(0, problem=f"no answer within {how.timeout:g}s")
            except AddressRefused as exc:
                raise Undeliverable(str(exc)) from None
            except aiohttp.ClientError as exc:
                blocked = addresses.refused(exc)
                if blocked is not None:
                    raise Undeliverable(str(blocked)) from None
                answer = _Answer(0, problem=describe(exc))
            status, detail = answer.status, answer.problem
            if 200 <= status < 300 and not detail:
                return answer.text
            if status and status != 429 and status < 500:  # refused, or a 2xx that says it failed: final
                raise Undeliverable(detail or f"the receiver answered {status}")
            delay = min(answer.retry_after if answer.retry_after is not None else self.backoff.after(attempt),
                        self.backoff.limit)
            if time.monotonic() - started + delay > self.retry_for:
                raise Undeliverable(f"{detail or f'the receiver answered {status}'} ({attempt} attempts in "
                                    f"{time.monotonic() - started:.0f}s)")
            retrying()
            await asyncio.sleep(delay)

    async def _post(self, request: Request, how: Connection) -> _Answer:
        """The answer (its status, Retry-After, what went wrong even in 2xx, its text); redirects followed by hand,
        each hop's address checked, and a request's credentials not carried to another origin."""
        url, method, body, headers = request.url, request.method, request.body, dict(request.headers)
        for _ in range(_REDIRECTS + 1):
            addresses.check_url(self.policy, url)
            if how.proxy:
                addresses.check_url(self.policy, how.proxy)
            async with self._client().request(
                    method, url, data=body, headers=headers, ssl=how.ssl if how.ssl else True,
                    proxy=how.proxy or None, proxy_auth=how.proxy_auth, allow_redirects=False) as answer:
                if answer.status in (301, 302, 303, 307, 308) and "Location" in answer.headers:
                    target = urljoin(url, answer.headers["Location"])
                    if _origin(target) != _origin(url):
                        headers = {k: v for k, v in headers.items() if k.lower() in _PLAIN}
                    url = target
                    if answer.status == 303 or (answer.status in (301, 302) and method == "POST"):
                        method, body = "GET", b""
                    continue
                text = (await answer.content.read(max(request.reads, _ANSWER))).decode(errors="replace")
                return _Answer(answer.status, _retry_after(answer.headers.get("Retry-After", "")),
                               _problem(answer.status, text), text)
        return _Answer(0, problem=f"more than {_REDIRECTS} redirects")

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


@dataclass(frozen=True)
class _Answer:
    status: int
    retry_after: float | None = None
    problem: str = ""  # why it failed (its own words), even in 2xx
    text: str = ""


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


def _retry_after(value: str) -> float | None:
    """Seconds from a Retry-After header (a number of seconds, or an HTTP date)."""
    value = value.strip()
    if not value:
        return None
    if value.isdigit():
        return float(value)
    with contextlib.suppress(TypeError, ValueError):
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    return None


def _problem(status: int, text: str) -> str:
    """What a receiver's answer says went wrong: Slack's API answers 200 with ``{"ok": false, "error": ...}``; an
    error's own words (its first line, short)."""
    if 200 <= status < 300:
        with contextlib.suppress(ValueError, AttributeError, RecursionError):
            answer: Any = json.loads(text)
            if isinstance(answer, dict) and answer.get("ok") is False:
                return f"the receiver answered ok: false ({str(answer.get('error', ''))[:100]})"
        return ""
    first = (text.strip().splitlines() or [""])[0][:200]
    return f"the receiver answered {status}" + (f": {first}" if first else "")


Work = Callable[[], Awaitable[None]]


class Outbox:
    """One Provider's queue of deliveries (each a coroutine function that resolves and sends one notification),
    run in order by a task of its own while it has any."""

    def __init__(self, limit: int, dropped: Callable[[], None]) -> None:
        self.queue: deque[Work] = deque()
        self.limit = limit
        self.dropped = dropped
        self._task: asyncio.Task[None] | None = None

    def put(self, work: Work) -> None:
        if len(self.queue) >= self.limit:
            self.queue.popleft()
            self.dropped()
        self.queue.append(work)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while self.queue:
            work = self.queue.popleft()
            try:
                await work()
            except Exception as exc:  # a bug, or the API failing: this notification is lost, not the queue behind it
                log.error("a notification was not sent: %s", type(exc).__name__)

    async def close(self) -> None:
        self.queue.clear()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
