"""Owners and admins list and download their organization's archives through the API, the
settings page and (operators) the admin; another organization's archive is a 404, lower
roles a 403, and an unreachable store a 503 with a code, never a 500."""

import gzip
import hashlib
import json

import requests
from django.urls import reverse

from apps.accounts.models import Membership
from apps.archives.models import Archive
from tests.api.conftest import error_of

Role = Membership.Role


def streamed(response):
    return b"".join(response.streaming_content)


def test_owner_lists_and_downloads_archives_through_the_api(archived, member_client):
    client = member_client(archived, Role.OWNER)
    listed = client.get("/api/v1/archives/").json()
    archives = Archive.objects.for_organization(archived.organization)
    assert {item["id"] for item in listed["results"]} == {str(a.pk) for a in archives} and len(archives) == 2
    item = listed["results"][0]
    assert item["day"] > listed["results"][1]["day"]  # newest day first
    response = client.get(f"/api/v1/archives/{item['id']}/download/")
    assert response.status_code == 200 and response["Content-Type"] == "application/gzip"
    body = streamed(response)
    assert hashlib.sha256(body).hexdigest() == item["sha256"] == response["X-Archive-SHA256"]
    lines = [json.loads(line) for line in gzip.decompress(body).decode().splitlines()]
    assert len(lines) == item["rows"] == 2
    assert {line["id"] for line in lines} <= {str(r.pk) for r in archived.runs}


def test_admin_key_may_and_lower_roles_may_not(archived, member_client, api):
    archive = Archive.objects.for_organization(archived.organization).first()
    assert member_client(archived, Role.ADMIN).get("/api/v1/archives/").status_code == 200
    for role in (Role.DEVELOPER, Role.VIEWER):
        response = member_client(archived, role).get(f"/api/v1/archives/{archive.pk}/download/")
        assert response.status_code == 403 and error_of(response)["code"] == "permission_denied"


def test_another_organizations_archive_is_not_found(archived, other_tenant, member_client):
    archive = Archive.objects.for_organization(archived.organization).first()
    outsider = member_client(other_tenant, Role.OWNER)
    assert outsider.get("/api/v1/archives/").json()["results"] == []
    for url in (f"/api/v1/archives/{archive.pk}/", f"/api/v1/archives/{archive.pk}/download/"):
        response = outsider.get(url)
        assert response.status_code == 404 and error_of(response)["code"] == "not_found"
    page = member_client(other_tenant, Role.OWNER).get(reverse("archive_download", args=[archive.pk]))
    assert page.status_code == 404


def test_presigned_download_redirects_to_the_object(archived, member_client, settings):
    settings.ARCHIVE_PRESIGNED_DOWNLOADS = True
    archive = Archive.objects.for_organization(archived.organization).first()
    response = member_client(archived, Role.OWNER).get(f"/api/v1/archives/{archive.pk}/download/")
    assert response.status_code == 302 and "X-Amz-Signature=" in response["Location"]
    fetched = requests.get(response["Location"], timeout=10)
    assert fetched.status_code == 200 and hashlib.sha256(fetched.content).hexdigest() == archive.sha256


def test_unreachable_or_unconfigured_storage_is_a_503_with_a_code(archived, member_client, settings):
    archive = Archive.objects.for_organization(archived.organization).first()
    client = member_client(archived, Role.OWNER)
    settings.ARCHIVE_S3_ENDPOINT_URL = "http://127.0.0.1:9"  # nothing listens there
    response = client.get(f"/api/v1/archives/{archive.pk}/download/")
    assert response.status_code == 503 and error_of(response)["code"] == "archive_storage_unavailable"
    settings.ARCHIVE_S3_BUCKET = ""
    response = client.get(f"/api/v1/archives/{archive.pk}/download/")
    assert response.status_code == 503 and error_of(response)["code"] == "archive_storage_unavailable"
    page = client.get(reverse("archive_download", args=[archive.pk]))
    assert page.status_code == 302 and page["Location"] == reverse("archive_list")


def test_settings_page_lists_and_downloads_for_owners_and_admins_only(archived, member_client):
    archive = Archive.objects.for_organization(archived.organization).first()
    owner = member_client(archived, Role.OWNER)
    page = owner.get(reverse("archive_list"))
    assert page.status_code == 200
    html = page.content.decode()
    assert reverse("archive_download", args=[archive.pk]) in html and archive.day.isoformat() in html
    download = owner.get(reverse("archive_download", args=[archive.pk]))
    assert download.status_code == 200 and hashlib.sha256(streamed(download)).hexdigest() == archive.sha256
    assert member_client(archived, Role.DEVELOPER).get(reverse("archive_list")).status_code == 403


def test_admin_lists_archives_with_a_download_link(archived, admin_client):
    archive = Archive.objects.for_organization(archived.organization).first()
    listing = admin_client.get(reverse("admin:archives_archive_changelist"))
    link = reverse("admin:archives_archive_download", args=[archive.pk])
    assert listing.status_code == 200 and link in listing.content.decode()
    assert admin_client.get(reverse("admin:archives_archive_change", args=[archive.pk])).status_code == 200
    download = admin_client.get(link)
    assert download.status_code == 200 and hashlib.sha256(streamed(download)).hexdigest() == archive.sha256
