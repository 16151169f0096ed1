"""A job's workflow links (its upstream and downstream JobDependency rows), read for many
jobs in one hand-written query and attached to them for the serializer."""

from dataclasses import dataclass

from apps.sql import rows

from . import queries
from .models import Job, JobDependency


@dataclass(frozen=True)
class Link:
    upstream_id: object
    downstream_id: object
    on: str
    downstream_name: str


def load_links(jobs):
    """Attach every job's upstream and downstream links, read in one hand-written query (the
    ORM's two prefetches cost several times the query itself: most of a job read). Jobs
    annotated ``has_links=False`` have none: no query for them."""
    linked = [job for job in jobs if getattr(job, "has_links", True)]
    if not linked:
        return attach_links(jobs, [])
    ids = [rows.db_value(Job, "id", job.pk) for job in linked]
    return attach_links(jobs, rows.fetch_all(queries.links_sql(len(ids)), ids + ids, JobDependency))


def attach_links(jobs, found):
    """Give each job its links from ``found``, pairs of (JobDependency, its downstream's
    name) in link order; a pair whose dependency has no id (an outer join's miss) is none."""
    by_id = {job.pk: job for job in jobs}
    for job in jobs:
        job.loaded_links = {"upstream_links": [], "downstream_links": []}
    for dependency, downstream_name in found:
        if dependency.pk is None:
            continue
        link = Link(dependency.upstream_id, dependency.downstream_id, dependency.on, downstream_name)
        if link.downstream_id in by_id:
            by_id[link.downstream_id].loaded_links["upstream_links"].append(link)
        if link.upstream_id in by_id:
            by_id[link.upstream_id].loaded_links["downstream_links"].append(link)
    return jobs


def job_links(job, name):
    """The job's upstream or downstream links (loaded by load_links, or read now)."""
    if job.pk is None or job._state.adding:
        return []
    if getattr(job, "loaded_links", None) is None:
        load_links([job])
    return job.loaded_links[name]
