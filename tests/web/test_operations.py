"""Dead-letter page with replay, crontab import, error pages."""

from datetime import timedelta

from django.test import Client
from django.utils import timezone

from apps.executions.models import Execution
from apps.jobs.models import Job


def html(response):
    return response.content.decode()


def dead(tenant, job, minutes_ago):
    return Execution.objects.create(job=job, organization=tenant.organization, status="dead", attempt=3,
                                    scheduled_for=timezone.now() - timedelta(minutes=minutes_ago),
                                    error_kind="http_5xx", error_message="HTTP 503", response_status=503)


def test_dead_letter_lists_dead_runs_only(tenant, other_tenant, owner, make_job):
    job = make_job(tenant, name="flaky endpoint")
    dead(tenant, job, 5)
    Execution.objects.create(job=job, organization=tenant.organization, status="failed", scheduled_for=timezone.now())
    dead(other_tenant, make_job(other_tenant, name="their flaky job"), 5)
    page = html(owner.get("/dead-letter/"))
    assert "flaky endpoint" in page and "HTTP 503" in page and "their flaky job" not in page
    assert page.count('name="one"') == 1


def test_replay_one_and_selected(tenant, owner, make_job):
    job = make_job(tenant)
    first, second, third = dead(tenant, job, 3), dead(tenant, job, 2), dead(tenant, job, 1)
    response = owner.post("/dead-letter/replay/", {"one": str(first.pk), "ids": [str(second.pk)]})
    assert response.status_code == 302
    assert list(Execution.objects.filter(trigger="replay").values_list("replay_of", flat=True)) == [first.pk]
    owner.post("/dead-letter/replay/", {"ids": [str(second.pk), str(third.pk)]})
    replayed = set(Execution.objects.filter(trigger="replay").values_list("replay_of", flat=True))
    assert replayed == {first.pk, second.pk, third.pk}
    assert Execution.objects.get(replay_of=third).status == "queued"


def test_replay_of_another_organizations_run_replays_nothing(tenant, other_tenant, owner, make_job):
    mine = dead(tenant, make_job(tenant), 1)
    theirs = dead(other_tenant, make_job(other_tenant), 1)
    response = owner.post("/dead-letter/replay/", {"ids": [str(mine.pk), str(theirs.pk)]}, follow=True)
    assert "nothing was replayed" in html(response)
    assert not Execution.objects.filter(trigger="replay").exists()


def test_a_viewer_cannot_replay(tenant, web_client, make_job):
    viewer = web_client(tenant, "viewer")
    execution = dead(tenant, make_job(tenant), 1)
    assert 'name="one"' not in html(viewer.get("/dead-letter/"))
    assert viewer.post("/dead-letter/replay/", {"one": str(execution.pk)}).status_code == 403


CRONTAB = """CRON_TZ=Europe/Berlin
0 3 * * * curl -fsS -X POST https://example.com/nightly
*/30 * * * * wget -q -O- https://example.com/half-hourly
15 4 * * * /usr/local/bin/backup.sh
"""


def test_import_preview_then_create(tenant, owner):
    page = html(owner.post("/import/", {"crontab": CRONTAB, "project": str(tenant.project.pk), "action": "preview"}))
    assert "Preview: 2 jobs would be created, 1 line skipped" in page
    assert "At 03:00 (Europe/Berlin)" in page and "backup.sh" in page
    assert Job.objects.count() == 0
    page = html(owner.post("/import/", {"crontab": CRONTAB, "project": str(tenant.project.pk), "action": "create"}))
    assert "2 jobs created" in page
    assert set(Job.objects.values_list("url", flat=True)) == {"https://example.com/nightly",
                                                               "https://example.com/half-hourly"}
    assert Job.objects.get(url="https://example.com/nightly").timezone == "Europe/Berlin"


def test_import_respects_the_plan_and_refuses_other_projects(make_tenant, other_tenant, web_client):
    free = make_tenant(plan="free")
    client = web_client(free)
    page = html(client.post("/import/", {"crontab": CRONTAB, "project": str(free.project.pk), "action": "create"}))
    assert "1 job created" in page and "plan" in page  # */30 is more often than the free plan allows
    response = client.post("/import/", {"crontab": CRONTAB, "project": str(other_tenant.project.pk),
                                        "action": "create"})
    assert response.status_code == 400 and 'id="id_project-error"' in html(response)


# --- error pages


def test_404_is_a_page_for_people_and_json_under_the_api(tenant, owner):
    response = owner.get("/no/such/page/")
    assert response.status_code == 404
    assert "<!doctype html>" in html(response) and "Not found" in html(response)
    api = Client().get("/api/v1/no-such-endpoint/")
    assert api.status_code == 404 and api.json()["error"]["code"] == "not_found"


def test_403_page(tenant, web_client):
    viewer = web_client(tenant, "viewer")
    response = viewer.get("/settings/api-keys/")
    assert response.status_code == 403 and "Not allowed" in html(response)


def test_400_and_500_templates_render_on_their_own():
    from django.template.loader import render_to_string
    from django.test import RequestFactory

    assert "Something went wrong" in render_to_string("500.html")
    request = RequestFactory().get("/x")
    from django.contrib.auth.models import AnonymousUser

    request.user = AnonymousUser()
    assert "Bad request" in render_to_string("400.html", request=request)
