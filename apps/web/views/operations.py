"""The dead-letter page (replay one or many) and the crontab import page."""

from functools import partial

from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from apps.api.audit import audit
from apps.api.errors import flatten
from apps.executions.scheduling.triggers import NotFinished, replay_all
from apps.executions.models import Execution
from apps.jobs.crontab_import import ImportCrontabSerializer, import_crontab
from cronsvc.ids import uuid_or_none

from apps.api.access import Role, member_view
from apps.api.pages import serializer_context

PAGE_SIZE = 50


def dead_executions(actor):
    """As the API's DeadLetterViewSet.get_queryset."""
    executions = Execution.objects.for_organization(actor.organization).filter(status=Execution.Status.DEAD)
    return actor.scope_to_projects(executions, "job__project")


@member_view
def dead_letter(request):
    executions = dead_executions(request.actor).select_related("job", "job__project").order_by("-scheduled_for")
    project = request.GET.get("project", "")
    if project:
        executions = executions.filter(job__project_id=uuid_or_none(project))
    page = Paginator(executions, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "web/dead_letter.html", {
        "page": page, "projects": request.actor.projects(), "project": project,
        "can_replay": request.actor.has_role(Role.DEVELOPER),
    })


@member_view(role=Role.DEVELOPER)
@require_POST
def dead_letter_replay(request):
    """Replay the chosen dead runs: all of them, or none if one is not a dead run of yours."""
    chosen = [request.POST["one"]] if request.POST.get("one") else request.POST.getlist("ids")
    ids = [uuid_or_none(value) for value in chosen]
    ids = list(dict.fromkeys(pk for pk in ids if pk is not None))
    if not ids:
        messages.error(request, "Choose at least one run to replay.")
        return redirect("web:dead_letter")
    dead = {e.pk: e for e in dead_executions(request.actor).filter(pk__in=ids)
            .select_related("job__organization__plan")}
    if len(dead) != len(ids):
        messages.error(request, "Some of the chosen runs are no longer in the dead letter; nothing was replayed.")
        return redirect("web:dead_letter")
    try:
        one = len(ids) == 1
        replays = replay_all([dead[pk] for pk in ids], audit=partial(audit, request),
                             action="execution.replay" if one else "execution.bulk_replay",
                             target=dead[ids[0]] if one else None)
    except NotFinished as exc:
        messages.error(request, str(exc))
        return redirect("web:dead_letter")
    messages.success(request, f"{len(replays)} run{'s' if len(replays) != 1 else ''} queued again; "
                              "each replay shows in its job's history.")
    return redirect("web:dead_letter")


@member_view(role=Role.DEVELOPER)
def crontab_import(request):
    """Paste a crontab, preview what would be created (a dry run), then create."""
    projects = list(request.actor.projects())
    values = {"crontab": "", "project": str(projects[0].pk) if projects else ""}
    context = {"projects": projects, "values": values, "result": None, "errors": {}}
    if request.method == "POST":
        create = request.POST.get("action") == "create"
        values.update(crontab=request.POST.get("crontab", ""), project=request.POST.get("project", ""))
        serializer = ImportCrontabSerializer(
            data={"crontab": values["crontab"], "project": values["project"], "dry_run": not create},
            context=serializer_context(request))
        if not serializer.is_valid():
            context["errors"] = flatten(serializer.errors)
            return render(request, "web/import.html", context, status=400)
        result = import_crontab(**serializer.validated_data, context=serializer_context(request),
                                audit=partial(audit, request))
        context["result"] = result
        if create:
            messages.success(request, f"{len(result['jobs'])} job{'s' if len(result['jobs']) != 1 else ''} created.")
    return render(request, "web/import.html", context)
