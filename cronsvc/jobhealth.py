"""What a group of finished runs does to their job's health, computed once for every
recording path (the grouped PostgreSQL statement and the one-by-one ORM updates).

Per job, in the order the runs finished: the failures before the group's first success add
to the stored count of consecutive failures; a success resets it, so after the last success
the count is the failures since; the job is disabled if a streak of failures reached the
plan's threshold (``auto_disable_after_failures``; 0 means never).
"""

from dataclasses import dataclass

from .statuses import FAILED, RAN, SUCCEEDED


@dataclass(frozen=True)
class HealthDelta:
    reset: bool  # a success in the group: the count starts again from ``tail``
    head: int  # failures before the group's first success (added to the stored count)
    tail: int  # failures after the group's last success
    disable: bool  # a streak after a success already reached the threshold

    def failures(self, stored):
        """The job's consecutive failures after the group, from the ``stored`` count."""
        return self.tail if self.reset else stored + self.head

    def disables(self, stored, threshold):
        """Does the group disable a job that had ``stored`` consecutive failures?"""
        return threshold > 0 and (self.disable or (self.head > 0 and stored + self.head >= threshold))


def counts(status):
    """Does a run ending in ``status`` count for its job's health (a success or a failure)?"""
    return status in RAN


def health_delta(statuses, threshold):
    """The HealthDelta of runs ending in ``statuses`` (in order; others are ignored)."""
    head = tail = 0
    reset = disable = False
    for status in statuses:
        if status == SUCCEEDED:
            reset, tail = True, 0
        elif status in FAILED:
            if reset:
                tail += 1
                disable = disable or (threshold > 0 and tail >= threshold)
            else:
                head += 1
    return HealthDelta(reset=reset, head=head, tail=tail, disable=disable)


def disabled_reason(threshold):
    """The reason a job disabled by its failures shows."""
    return f"Disabled automatically after {threshold} consecutive failed runs."
