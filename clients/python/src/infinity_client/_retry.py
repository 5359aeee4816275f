"""When a request is worth sending again, and how long to wait first: the client's one policy.

A connection that failed or dropped, a timeout, 408, 429 and any 5xx say nothing about the
request itself: a server restarting, a proxy in between, a host that is busy. Any other 4xx
would get the same answer again, so it is final. Waits double from a short first one up to a
cap, each shortened at random by up to half (jitter: many clients that lost the same server do
not all come back at the same instant); a ``Retry-After`` the server sent is waited as it is.

:class:`Backoff` counts the failures in a row of one request (or of one event stream's
connections) and says how long to wait, or raises the error when the budget is spent.
``run_tools`` gives every request it makes :data:`RUNNER_BUDGET`: about a minute.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
import httpx

from ._errors import InfinityError

T = TypeVar("T")

#: The first wait after a failure, in seconds; each failure in a row doubles it...
FIRST_WAIT = 0.25
#: ... up to this.
MOST_WAIT = 5.0
#: How long ``run_tools`` tries a request again after its first attempt failed, in seconds: no
#: attempt starts later than this after the first.
RUNNER_BUDGET = 60.0


def retryable(error: BaseException) -> bool:
    """True when sending the same request again may succeed: a transport error (refused,
    dropped, timed out), or an answer of 408, 429 or 5xx."""
    if isinstance(error, httpx.TransportError):
        return True
    if isinstance(error, InfinityError):
        return error.status in (408, 429) or 500 <= error.status <= 599
    return False


class Backoff:
    """The waits between the attempts of one request, and when to give up.

    ``failed(error)`` gives the wait before the next attempt, or raises ``error`` when it is
    final (see :func:`retryable`) or a limit is reached: ``max_failures`` failures in a row, or
    ``budget`` seconds since the first failure in a row (the next attempt would start later).
    ``succeeded()`` starts afresh. ``clock`` and ``rand`` are for tests.
    """

    def __init__(
        self,
        *,
        first: float = FIRST_WAIT,
        most: float = MOST_WAIT,
        budget: float | None = None,
        max_failures: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.first = first
        self.most = most
        self.budget = budget
        self.max_failures = max_failures
        self._clock = clock
        self._rand = rand
        self.failures = 0
        self._since = 0.0

    def succeeded(self) -> None:
        """The request went through: the failures so far no longer count."""
        self.failures = 0

    def failed(self, error: Exception) -> float:
        """The wait before the next attempt after ``error``; raises ``error`` when none comes."""
        if not retryable(error):
            raise error
        now = self._clock()
        if self.failures == 0:
            self._since = now
        self.failures += 1
        if self.max_failures is not None and self.failures > self.max_failures:
            raise error
        asked = error.retry_after if isinstance(error, InfinityError) else None
        if asked is not None:
            wait = asked
        else:
            wait = min(self.most, self.first * 2.0 ** (self.failures - 1))
            wait -= wait * self._rand() / 2
        if self.budget is not None and now + wait - self._since > self.budget:
            raise error
        return wait


async def retrying(send: Callable[[], Awaitable[T]], budget: float = RUNNER_BUDGET) -> T:
    """Awaits ``send()`` until it succeeds, trying again as :class:`Backoff` says."""
    backoff = Backoff(budget=budget)
    while True:
        try:
            return await send()
        except (httpx.TransportError, InfinityError) as error:
            wait = backoff.failed(error)
        await anyio.sleep(wait)
