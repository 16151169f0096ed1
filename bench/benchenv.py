"""What every benchmark with a database of its own shares: refusing the tests' database and
Redis index (a benchmark empties its tables and flushes its index), creating and migrating
its database, and a timestamped log line. Imported by the bench_*.py scripts, which run
as ``python bench/<script>.py`` (so this folder is on sys.path)."""

import os
import sys
import time
from urllib.parse import urlsplit, urlunsplit


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def prepare(default_db, default_redis, *, refused_dbs=(), refused_redis=("0",), **defaults):
    """Check DATABASE_URL and REDIS_URL (or the defaults), export them with the settings
    module, create and migrate the database; return (db_url, db_name, redis_url).
    ``defaults`` are environment variables set when the caller has not set them."""
    db_url = os.environ.get("DATABASE_URL", default_db)
    redis_url = os.environ.get("REDIS_URL", default_redis)
    db_name = urlsplit(db_url).path.lstrip("/")
    if "bench" not in db_name or db_name in refused_dbs or db_name.startswith("test_"):
        sys.exit(f"refusing to run on database {db_name!r}: its tables are emptied; use e.g. "
                 f"{urlsplit(default_db).path.lstrip('/')}")
    redis_db = urlsplit(redis_url).path.lstrip("/") or "0"
    if redis_db in refused_redis:
        sys.exit(f"refusing Redis DB {redis_db} (0 is the tests'; others' benchmarks use "
                 f"{', '.join(refused_redis[1:]) or 'none'}): it is flushed; use e.g. {default_redis}")
    os.environ.update(DATABASE_URL=db_url, REDIS_URL=redis_url, DJANGO_SETTINGS_MODULE="config.settings")
    for name, value in {"SECRET_KEY": "bench-only", **defaults}.items():
        os.environ.setdefault(name, value)
    os.environ.pop("CELERY_BROKER_URL", None)  # the broker is the benchmark's Redis index
    os.environ.pop("DEBUG", None)  # DEBUG keeps every query in memory
    _ensure_database(db_url, db_name)
    _setup_django()
    return db_url, db_name, redis_url


def _ensure_database(db_url, db_name):
    import psycopg

    admin_url = urlunsplit(urlsplit(db_url)._replace(path="/postgres"))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [db_name]).fetchone():
            conn.execute(f'CREATE DATABASE "{db_name}"')
            log(f"created database {db_name}")


def _setup_django():
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)
