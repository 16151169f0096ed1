"""One workflow run as the API and the pages show it: its executions in order, and its chain
as a graph (nodes = jobs, edges = the dependencies that took part)."""

from dataclasses import dataclass

from apps.executions.models import Execution
from apps.jobs.models import JobDependency
from cronsvc.statuses import FAILED


@dataclass
class WorkflowRun:
    id: object
    executions: list  # ordered by creation
    edges: list  # [(upstream job id, downstream job id, on)] between the run's jobs

    @property
    def status(self):
        """running while any execution is unfinished; else failed if any failed, skipped
        if any was skipped, succeeded otherwise."""
        statuses = {execution.status for execution in self.executions}
        if statuses & {Execution.Status.QUEUED, Execution.Status.RUNNING}:
            return "running"
        if statuses & FAILED:
            return "failed"
        if Execution.Status.SKIPPED in statuses:
            return "skipped"
        return "succeeded"


def load_run(run_id, executions):
    """The run ``run_id`` among ``executions`` (a queryset already scoped to the caller's
    organization and projects), or None: another tenant's run reads as missing. The
    first execution carries the run's id only once it finished, so it is found by its id."""
    from django.db.models import Q

    rows = list(executions.filter(Q(workflow_run_id=run_id) | Q(id=run_id))
                .select_related("job").order_by("created_at", "id"))
    if not rows:
        return None
    job_ids = {row.job_id for row in rows}
    edges = list(JobDependency.objects.filter(upstream_id__in=job_ids, downstream_id__in=job_ids)
                 .order_by("id").values_list("upstream_id", "downstream_id", "on"))
    return WorkflowRun(id=run_id, executions=rows, edges=edges)
