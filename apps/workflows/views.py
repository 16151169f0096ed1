"""The workflow-run page: the chain as a server-rendered SVG graph and its executions."""

from django.http import Http404
from django.shortcuts import render
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET

from apps.executions.models import Execution
from apps.api.access import member_view

from .graph import Node, render_svg
from .runs import load_run


@member_view
@require_GET
def workflow_run(request, pk):
    executions = request.actor.scope_to_projects(
        Execution.objects.for_organization(request.actor.organization), "job__project")
    run = load_run(pk, executions)
    if run is None:
        raise Http404("No workflow run with this id.")
    nodes = [Node(key=e.job_id, label=e.job.name, status=e.status,
                  href=reverse("web:execution_detail", args=[e.pk])) for e in run.executions]
    context = {"run": run, "graph": mark_safe(render_svg(nodes, run.edges))}  # every label escaped in render_svg
    return render(request, "web/workflows/run.html", context)
