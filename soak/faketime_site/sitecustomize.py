"""Loaded (PYTHONPATH) by the soak's processes that run under libfaketime with
FAKETIME_DONT_FAKE_MONOTONIC: their wall clock is skewed or jumps, their monotonic clock
stays true, as on a real host whose clock NTP steps.

libfaketime 0.9.10 fails Python 3.11's time.sleep (an absolute CLOCK_MONOTONIC
clock_nanosleep) with EINVAL when it leaves the monotonic clock alone, and when it fakes
that clock instead, every threading wait with a timeout (sem_clockwait, which it does not
intercept) waits for decades. So here time.sleep waits in select(), by the true monotonic clock.
"""

import select
import time


def _sleep(seconds):
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        select.select([], [], [], left)


time.sleep = _sleep
