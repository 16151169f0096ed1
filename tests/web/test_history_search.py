"""The search box of a job's history: words of the error or the response, an HTTP status
(exact or a class), the status filter, all kept in the page's address."""

from datetime import timedelta

from django.utils import timezone

from apps.executions.models import Execution

HTMX = {"HTTP_HX_REQUEST": "true"}


def text(response):
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def _history(tenant, job):
    now = timezone.now()
    rows = [("failed", 503, "HTTP 503", "<h1>503 Service Temporarily Unavailable</h1>"),
            ("failed", None, "Connection refused", ""),
            ("succeeded", 200, "", '{"ok": true, "batch": "b-7f3a"}')]
    return Execution.objects.bulk_create([
        Execution(job=job, organization=tenant.organization, scheduled_for=now - timedelta(minutes=i), status=status,
                  response_status=code, error_kind="http" if error else "", error_message=error, response_body=body)
        for i, (status, code, error, body) in enumerate(rows)])


def test_the_history_has_a_search_box_that_finds_errors_and_responses(tenant, owner, make_job):
    job = make_job(tenant)
    _history(tenant, job)
    page = text(owner.get(f"/jobs/{job.pk}/"))
    assert 'name="q"' in page and 'name="status_code"' in page and 'role="search"' in page
    assert page.count("badge bad") == 2 and page.count("badge ok") >= 1

    found = text(owner.get(f"/jobs/{job.pk}/history/?q=refused", **HTMX))
    assert found.count("badge bad") == 1 and "badge ok" not in found and "?q=refused" in found
    # The search box is not in what the search and the refresh swap: what is typed stays as typed.
    assert 'id="history-q"' not in found
    assert 'value="refused"' in text(owner.get(f"/jobs/{job.pk}/?q=refused"))
    assert text(owner.get(f"/jobs/{job.pk}/history/?q=b-7f3a")).count("badge ok") == 1
    unavailable = text(owner.get(f"/jobs/{job.pk}/history/?status_code=5xx&status=failed"))
    assert "HTTP 503" in unavailable and "refused" not in unavailable and "status_code=5xx" in unavailable
    assert "No run matches." in text(owner.get(f"/jobs/{job.pk}/history/?q=nothing-like-it"))


def test_the_search_stays_in_the_address_and_the_polling(tenant, owner, make_job):
    job = make_job(tenant)
    _history(tenant, job)
    response = owner.get(f"/jobs/{job.pk}/history/?q=refused&status_code=&status=failed", **HTMX)
    assert response["HX-Replace-Url"] == f"/jobs/{job.pk}/?q=refused&status_code=&status=failed#history"
    partial = text(response)
    assert f'hx-get="/jobs/{job.pk}/history/?q=refused&amp;status_code=&amp;status=failed"' in partial
    # The job page opened at that address shows the same search.
    page = text(owner.get(f"/jobs/{job.pk}/?q=refused&status=failed"))
    assert 'value="refused"' in page and page.count("badge bad") == 1


def test_a_search_that_cannot_run_says_why(tenant, owner, make_job):
    job = make_job(tenant)
    _history(tenant, job)
    for query, message in (("q=-refused", "not only -exclusions"), ("status_code=6xx", "HTTP status code")):
        page = text(owner.get(f"/jobs/{job.pk}/history/?{query}"))
        assert message in page and 'role="alert"' in page and "badge bad" not in page


def test_another_organizations_job_history_is_404(tenant, other_tenant, owner, make_job):
    theirs = make_job(other_tenant)
    assert owner.get(f"/jobs/{theirs.pk}/history/?q=refused", **HTMX).status_code == 404
