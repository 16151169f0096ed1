"""apps/sql/backend: the hot paths' hand-written statements (apps.sql.rows) are
prepared once per connection; Django's own queries (the ORM's, plain cursors) are not, and the setting turns it off."""

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from apps.sql import rows
from apps.jobs.models import Job

pytestmark = pytest.mark.django_db


@pytest.fixture
def own_connection():
    def make():
        connection = connections.create_connection("default")  # fresh: nothing prepared on it yet
        made.append(connection)
        return connection

    made = []
    yield make
    for connection in made:
        connection.close()


def _prepared(connection):
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def test_a_hand_written_statement_is_prepared_and_the_orms_are_not(own_connection, tenant):
    connection = own_connection()
    sql = f'SELECT {rows.select_list(Job, "j")} FROM "jobs_job" j WHERE j."organization_id" = %s'
    for _ in range(2):
        with connection.prepared_cursor() as cursor:
            cursor.execute(sql, [tenant.organization.pk])
            assert cursor.fetchall() == []
    for _ in range(6):  # past psycopg's usual threshold (5) for preparing a repeated statement
        with connection.cursor() as cursor:
            cursor.execute('SELECT count(*) FROM "jobs_job" WHERE "name" = %s', ["plain"])
    assert _prepared(connection) == [sql.replace("%s", "$1")]


def test_the_rows_helpers_read_through_prepared_statements_and_are_logged(tenant, make_job):
    job = make_job(tenant, name="prepared", headers={"X-A": "1"})
    sql = f'SELECT {rows.select_list(Job, "j")} FROM "jobs_job" j WHERE j."id" = %s'
    connection = connections["default"]
    with CaptureQueriesContext(connection) as queries:
        found = [rows.fetch_one(sql, [rows.db_value(Job, "id", job.pk)], Job) for _ in range(2)]
    assert [(f[0].pk, f[0].name, f[0].headers) for f in found] == [(job.pk, "prepared", {"X-A": "1"})] * 2
    assert sql.replace("%s", "$1") in _prepared(connection)
    logged = [q["sql"] for q in queries.captured_queries]  # with the value in, as Django logs its own
    assert len(logged) == 2 and all(q.startswith(sql.split("%s")[0]) and job.pk.hex in q.replace("-", "")
                                    for q in logged)
    for _ in range(6):
        assert [j.name for j in Job.objects.filter(pk=job.pk)] == ["prepared"]  # the ORM's query
    assert not [s for s in _prepared(connection) if s.startswith('SELECT "jobs_job"')]


def test_the_setting_turns_preparing_off(own_connection, settings, tenant):
    settings.DATABASE_PREPARED_STATEMENTS = False
    connection = own_connection()
    with connection.prepared_cursor() as cursor:
        cursor.execute('SELECT "name" FROM "jobs_job" WHERE "organization_id" = %s', [tenant.organization.pk])
    assert connection.connection.prepare_threshold is None
    assert _prepared(connection) == []
