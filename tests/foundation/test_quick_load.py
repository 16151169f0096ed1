"""apps.sql.loading.QuickLoad: a job or execution read from the database is the instance
Django's ``Model.__init__`` would build, without calling it."""

import sys

import pytest
from django.db import models
from django.db.models import signals

from apps.executions.models import Execution
from apps.jobs.models import Job

pytestmark = pytest.mark.django_db


def by_init(model, values):
    """The instance Django itself builds from a row (``Model.from_db``)."""
    return models.Model.from_db.__func__(model, "default", None, values)


def row_of(instance):
    model = type(instance)
    names = [field.attname for field in model._meta.concrete_fields]
    return list(model.objects.filter(pk=instance.pk).values_list(*names).get())


def same(a, b):
    assert type(a) is type(b)
    assert (a._state.adding, a._state.db) == (b._state.adding, b._state.db) == (False, "default")
    assert [key for key in a.__dict__] == [key for key in b.__dict__]
    assert {key: value for key, value in a.__dict__.items() if key != "_state"} == \
        {key: value for key, value in b.__dict__.items() if key != "_state"}


def test_a_loaded_job_and_execution_are_what_django_builds(tenant, make_job):
    job = make_job(tenant, name="loaded", tags=["a"], headers={"X": "1"}, auth={"type": "bearer", "token": "t"})
    execution = Execution.objects.create(job=job, organization=tenant.organization, status="succeeded",
                                         scheduled_for=job.created_at)
    for instance in (job, execution):
        values = row_of(instance)
        same(type(instance).from_db("default", None, values), by_init(type(instance), values))
    loaded = Job.objects.get(pk=job.pk)
    assert loaded.auth == {"type": "bearer", "token": "t"} and loaded.project.pk == tenant.project.pk
    loaded.name = "renamed"
    loaded.save()
    assert Job.objects.get(pk=job.pk).name == "renamed"


def test_deferred_columns_and_init_receivers_go_the_ordinary_way(tenant, make_job):
    job = make_job(tenant, name="deferred")
    only_name = Job.objects.only("name").get(pk=job.pk)
    assert only_name.get_deferred_fields() and only_name.url == job.url  # loaded when read, as usual
    seen = []

    def receiver(sender, instance, **kwargs):
        seen.append(instance)

    signals.post_init.connect(receiver, sender=Job)
    try:
        loaded = Job.objects.get(pk=job.pk)
    finally:
        signals.post_init.disconnect(receiver, sender=Job)
    assert seen == [loaded]


def test_a_page_of_jobs_is_loaded_without_model_init(tenant, make_job):
    for n in range(5):
        make_job(tenant, name=f"page {n}")
    called = set()

    def record(frame, event, arg):
        if event == "call":
            called.add(frame.f_code)

    sys.setprofile(record)
    try:
        page = list(Job.objects.filter(organization=tenant.organization))
    finally:
        sys.setprofile(None)
    assert len(page) >= 5
    assert models.Model.__init__.__code__ not in called


def test_rows_builds_the_instance_the_orm_loads(tenant, make_job):
    """apps.sql.rows converts only the columns with converters (JSON, encrypted) and builds
    through the model's from_db: the same values as the ORM's, secrets decrypted alike."""
    from apps.sql import rows

    job = make_job(tenant, name="built", tags=["a", "ü"], headers={"X": "1"}, secret_headers={"X-Token": "s"},
                   auth={"type": "basic", "username": "bob", "password": "pw"})
    sql = f'SELECT {rows.select_list(Job, "j")} FROM "{Job._meta.db_table}" j WHERE j."id" = %s'
    assert rows.select_list(Job, "j") is rows.select_list(Job, "j")  # written once
    (built,) = rows.fetch_one(sql, [rows.db_value(Job, "id", job.pk)], Job)
    same(built, Job.objects.get(pk=job.pk))
    assert built.secret_headers == {"X-Token": "s"} and built.auth["password"] == "pw"


def test_a_model_with_an_init_of_its_own_is_loaded_through_it(tenant, make_job, monkeypatch):
    """A QuickLoad model that gains an ``__init__`` (say, to set a derived attribute) must
    not be skipped by the quick load: its rows go through that ``__init__``."""
    job = make_job(tenant, name="own init")
    called = []

    def own_init(self, *args, **kwargs):
        called.append(len(args))
        models.Model.__init__(self, *args, **kwargs)

    monkeypatch.setattr(Job, "__init__", own_init)
    monkeypatch.delattr(Job, "_quick_attnames_cache", raising=False)  # as at start-up, with the new class
    loaded = Job.objects.get(pk=job.pk)
    assert called == [len(Job._meta.concrete_fields)] and loaded.name == "own init"
    monkeypatch.undo()
    if Job.__dict__.get("_quick_attnames_cache") is None:  # computed while patched: forget it
        delattr(Job, "_quick_attnames_cache")
    assert Job._quick_attnames() is not None  # Django's __init__ again: quick


def test_a_loaded_organization_project_and_plan_are_what_django_builds(tenant):
    """A worker builds the owners of every claimed batch's runs (apps.executions.queries.owners)."""
    for instance in (tenant.organization, tenant.project, tenant.organization.plan):
        values = row_of(instance)
        same(type(instance).from_db("default", None, values), by_init(type(instance), values))
    assert type(tenant.project).objects.get(pk=tenant.project.pk).signing_secrets == tenant.project.signing_secrets


def test_a_row_with_deferred_columns_is_what_django_builds(tenant, make_job):
    """A claim loads some columns of each run (queries.CLAIMED_COLUMNS): the instance is
    Django's, the other columns deferred and loaded when read."""
    from apps.executions import queries

    job = make_job(tenant, name="partly")
    execution = Execution.objects.create(job=job, organization=tenant.organization, scheduled_for=job.created_at)
    names = queries.CLAIMED_COLUMNS
    values = list(Execution.objects.filter(pk=execution.pk).values_list(*names).get())
    quick = Execution.from_db("default", names, values)
    same(quick, by_init(Execution, [values[names.index(f.attname)] if f.attname in names else models.DEFERRED
                                     for f in Execution._meta.concrete_fields]))
    assert quick.get_deferred_fields() == {f.attname for f in Execution._meta.concrete_fields} - set(names)
    assert quick.status == execution.status  # a deferred column, read from the database
