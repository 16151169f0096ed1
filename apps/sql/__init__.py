"""The boundary of cronsvc's hand-written SQL: everything that talks to the database below
the ORM lives here, and the statements themselves in each app's ``queries`` module. Only
these modules open cursors, run SQL text or use the ORM's raw-SQL escape hatches; any other
module runs a statement it takes from ``queries`` through ``rows.fetch_all``/``fetch_one``
(tests/foundation/test_sql_boundary.py checks).

- ``rows``: model instances from hand-written SELECTs and one-statement INSERTs (the API's
  hot paths), through prepared statements where the backend has them.
- ``bulk``: set-based statements over binary arrays (``unnest``), built from one column
  list, and the binding cursor they run on.
- ``pgtypes``: how PostgreSQL values are read where Django's default costs more.
- ``modes``: whether the database is PostgreSQL (the server mode) or the embedded mode's
  SQLite, asked by one dispatcher per hot path.
- ``backend``: Django's PostgreSQL backend with a socket health check and prepared cursors
  (``DATABASES["default"]["ENGINE"]``).
- ``clock``: the database's time (PostgreSQL's clock decides what is due).
- ``loading``: model instances loaded without ``Model.__init__`` for pages of rows.
- ``databases``: the release step's statements on the server's maintenance database.
- ``indexes``: indexes a migration builds CONCURRENTLY (PostgreSQL only).

The lowest app layer: it imports Django and psycopg, never another app (.importlinter).
"""
