"""Model instances from hand-written SQL, for the per-request queries of the API's hot paths
(authenticating the key, reading one job, creating one): there Django spends longer
compiling the ORM query than PostgreSQL spends running it. Everything else uses the ORM.

The instances are ordinary ones (``Model.from_db``): values pass through the same
converters the ORM applies (JSON, encrypted fields), and related objects fetched by the same
join are cached on them as ``select_related`` would. On PostgreSQL each statement is
prepared once per connection (``apps.sql.backend``), so it is not planned again on every
request.
"""

from functools import cache

from django.db import connections
from django.db.models import signals


@cache
def select_list(model, alias):
    """The model's columns, in field order, qualified by ``alias`` (written once per model
    and alias: the per-request queries ask for it on every request)."""
    return ", ".join(f'{alias}."{field.column}"' for field in model._meta.concrete_fields)


def fetch_all(sql, params, *models, using="default"):
    """Run ``sql`` (selecting each model's ``select_list`` in turn, then any other columns)
    and return, per row, a tuple of one instance per model followed by the other columns."""
    with prepared_cursor(using) as cursor:
        cursor.execute(sql, params)
        found = cursor.fetchall()
    result = []
    for row in found:
        items, start = [], 0
        for model in models:
            width = len(model._meta.concrete_fields)
            items.append(build(model, row[start:start + width], using))
            start += width
        result.append((*items, *row[start:]))
    return result


def fetch_one(sql, params, *models, using="default"):
    """The first row of ``fetch_all``, or None."""
    found = fetch_all(sql, params, *models, using=using)
    return found[0] if found else None


def prepared_cursor(using="default"):
    """A cursor whose statements are prepared where the backend can (apps.sql.backend)."""
    connection = connections[using]
    return getattr(connection, "prepared_cursor", connection.cursor)()


def db_value(model, field_name, value, using="default"):
    """``value`` as a query parameter for the field's column (a UUID is text on SQLite)."""
    return model._meta.get_field(field_name).get_db_prep_value(value, connections[using], prepared=False)


def build(model, values, using="default"):
    """An instance of ``model`` from its columns' raw values (in ``select_list`` order)."""
    connection = connections[using]
    converted = list(values)
    for index, field, converters in _converters(model, using):  # only the columns that have any
        value = converted[index]
        for converter in converters:
            value = converter(value, field, connection)
        converted[index] = value
    return model.from_db(using, None, converted)


@cache
def _converters(model, using):
    """(index, field, the converters the ORM would apply to its column) per concrete field
    that has converters (JSON, encrypted, ...): most columns arrive as they are shown."""
    connection = connections[using]
    result = []
    for index, field in enumerate(model._meta.concrete_fields):
        column = field.get_col(model._meta.db_table)
        converters = [*connection.ops.get_db_converters(column), *column.get_db_converters(connection)]
        if converters:
            result.append((index, field, converters))
    return tuple(result)


def insert(instance, using="default"):
    """Save a new ``instance`` by one hand-written INSERT of all its columns, its primary key
    set by its default, as ``Model.save()`` would for it (each field's ``pre_save`` and
    database preparation), without the ORM's insert compiler. A model with save signal
    receivers, or with a parent model's table to fill too, is saved by ``save()``."""
    model = type(instance)
    if instance.pk is None:
        raise ValueError(f"rows.insert needs {model.__name__}'s primary key set by its default")
    if (model._meta.parents or signals.pre_save.has_listeners(model)
            or signals.post_save.has_listeners(model)):  # a parent table's row; receivers to run
        instance.save(force_insert=True, using=using)
        return instance
    connection = connections[using]
    fields = model._meta.local_concrete_fields
    values = [field.pre_save(instance, add=True) for field in fields]
    if any(hasattr(value, "resolve_expression") for value in values):
        raise ValueError(f"rows.insert cannot insert an expression into {model.__name__}")
    with prepared_cursor(using) as cursor:
        cursor.execute(_insert_sql(model, using),
                       [field.get_db_prep_save(value, connection) for field, value in zip(fields, values)])
    instance._state.adding = False
    instance._state.db = using
    return instance


@cache
def _insert_sql(model, using):
    connection = connections[using]
    fields = model._meta.local_concrete_fields
    columns = ", ".join(connection.ops.quote_name(field.column) for field in fields)
    return (f"INSERT INTO {connection.ops.quote_name(model._meta.db_table)} ({columns}) "
            f"VALUES ({', '.join(['%s'] * len(fields))})")
