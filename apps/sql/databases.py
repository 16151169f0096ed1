"""The release step's statements on the server's maintenance database (apps/web's `release`
command): whether a database exists, and creating it."""

from psycopg import sql


def database_exists(server, name):
    return server.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is not None


def create_database(server, name):
    server.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
