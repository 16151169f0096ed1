"""The observability app's hand-written SQL: the readiness check's trivial query
(health.py, /readyz)."""

from django.db import connection

SELECT_ONE = "SELECT 1"


def select_one():
    """Run SELECT 1 on the default database: it answers, or this raises."""
    with connection.cursor() as cursor:
        cursor.execute(SELECT_ONE)
        cursor.fetchone()
