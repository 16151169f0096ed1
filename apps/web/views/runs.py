"""Run control pages: cancel a run (from its page or the job's history); a job's
versions with their changes, and rollback to one (apps.jobs.versions)."""

from functools import partial

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from apps.api.audit import audit
from apps.executions import cancelling
from apps.executions.models import Execution
from apps.jobs import validation, versions
from apps.jobs.services import rollback_job
from apps.jobs.versions_api import author_of

from apps.api.access import Role, member_view, require_role
from .jobs import get_job

VERSIONS_PAGE_SIZE = 20


def scoped_executions(actor):
    executions = Execution.objects.for_organization(actor.organization)
    return actor.scope_to_projects(executions, "job__project")


@member_view
@require_POST
def execution_cancel(request, pk):
    execution = get_object_or_404(scoped_executions(request.actor), pk=pk)
    require_role(request, Role.DEVELOPER)
    before = execution.status
    try:
        cancelling.cancel(execution, by=cancelling.cancelled_by(user=request.user), audit=partial(audit, request))
    except cancelling.ExecutionGone:
        raise Http404("The run was deleted with its job.") from None
    except cancelling.ExecutionFinished as exc:
        messages.error(request, f"Not cancelled: the run already finished ({exc.execution.get_status_display()}).")
    else:
        messages.success(request, "Run cancelled: it will not be sent again." if before == "queued"
                         else "Run cancelled: its request was closed and it will not be retried.")
    back = request.POST.get("next", "")
    if back and url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        return redirect(back)
    return redirect("web:execution_detail", pk=execution.pk)


@member_view
def job_versions(request, pk):
    job = get_job(request, pk)
    found = job.versions.select_related("actor_user", "actor_api_key").order_by("-number")
    page = Paginator(found, VERSIONS_PAGE_SIZE).get_page(request.GET.get("page"))
    for version in page.object_list:
        version.author = author_of(version)
    return render(request, "web/jobs/versions.html", {
        "job": job, "versions": page.object_list, "page": page, "can_edit": request.actor.has_role(Role.DEVELOPER)})


@member_view
@require_POST
def job_version_rollback(request, pk, number):
    job = get_job(request, pk)
    require_role(request, Role.DEVELOPER)
    version = get_object_or_404(job.versions, number=number)
    try:
        new = rollback_job(job, version, actor=request.actor, audit=partial(audit, request))
    except versions.VersionConflict as exc:
        messages.error(request, f"Not rolled back: {exc.message}")
    except validation.JobInvalid as exc:
        messages.error(request, "Not rolled back: " + " ".join(p.message for p in exc.problems))
    except validation.PlanLimit as exc:
        messages.error(request, f"Not rolled back: {exc.message}")
    else:
        messages.success(request, f"Rolled back to version {version.number}: now version {job.version}."
                         if new else f"The job already has version {version.number}'s definition.")
    return redirect("web:job_versions", pk=job.pk)
