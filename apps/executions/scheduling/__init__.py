"""Scheduling: the scheduler process's side of runs (ticks, publishing, sweeping, triggers)."""
