"""Objects to API documents fast, with a serializer's own fields.

DRF's ``Serializer.to_representation`` reaches every field of every object through
generic machinery (``get_attribute`` with its Mapping, callable and SkipField cases,
PKOnlyObject, a current-timezone lookup per datetime); on a page of 50 jobs that costs
more than reading the page from the database. Here a serializer's readable fields become,
once per thread, a plan of steps: a model column shown by a field class whose
representation is plain (text, number, boolean, UUID, datetime, a foreign key's id) is
read with ``attrgetter`` and converted directly; a nested plain serializer gets a plan of
its own; every other field (custom fields, method fields, lists, serializers with their
own ``to_representation``) is asked exactly as DRF asks it. The output is the same as
``serializer.to_representation`` (tests/api/test_representation.py compares them field
by field), so the serializer stays the one description of a resource.
"""

import threading
from datetime import datetime, timezone as dt_timezone
from operator import attrgetter
from zoneinfo import ZoneInfo

from django.conf import settings
from django.utils import timezone
from rest_framework import fields, relations, serializers
from rest_framework.fields import SkipField
from rest_framework.relations import PKOnlyObject
from rest_framework.settings import api_settings

_local = threading.local()
UTC_ZONES = (dt_timezone.utc, ZoneInfo("UTC"), ZoneInfo("Etc/UTC"))


def represent(serializer_class, instance, context):
    """``serializer_class(instance, context=context).to_representation(instance)``."""
    return _plan_for(serializer_class, context).write(instance, _CurrentZone())


def represent_many(serializer_class, instances, context):
    """The documents of ``instances`` (one plan and one timezone lookup for all)."""
    write, current = _plan_for(serializer_class, context).write, _CurrentZone()
    return [write(instance, current) for instance in instances]


def _plan_for(serializer_class, context):
    """The thread's plan for ``serializer_class``, bound to ``context`` for this call. Only
    for serializers whose fields do not depend on the context (it is read at call time)."""
    plans = _local.__dict__.setdefault("plans", {})
    entry = plans.get(serializer_class)
    if entry is None:
        serializer = serializer_class(context=context)
        entry = plans[serializer_class] = (serializer, _Plan(serializer, _model_of(serializer)))
    serializer, plan = entry
    serializer._context = context
    return plan


class _CurrentZone:
    """What every datetime of one call shares: the current timezone, looked up once, and
    whether it is UTC (a plain attribute the compiled plan reads without a call)."""

    __slots__ = ("zone", "utc")

    def __init__(self):
        self.zone = timezone.get_current_timezone()
        self.utc = self.zone in UTC_ZONES


class _Plan:
    """The steps of a serializer compiled into one function (``_compile``): a page of 50 jobs
    then costs one call per job plus one per field that needs its own code, instead of three
    per field (the step, the attribute read, the conversion)."""

    def __init__(self, serializer, model):
        self.steps = [_step(field, model) for field in serializer._readable_fields]
        self.write = _compile(self.steps)

    def __call__(self, instance, current):
        return self.write(instance, current)


def _compile(steps):
    """``write(instance, current)``: the document, field by field as the steps say. A plain
    column is read and converted inline (``str``, ``int``, ``float``, as is); every other
    step is called, a SkipField leaving its field out as DRF does."""
    namespace = {"SkipField": SkipField}
    lines = ["def write(instance, current):", "    document = {}"]
    for n, step in enumerate(steps):
        target = f"document[{step.name!r}]"
        if isinstance(step, _ColumnStep) and step.attname.isidentifier():
            lines += [f"    value = instance.{step.attname}",
                      f"    {target} = None if value is None else {_conversion(step.convert, n, namespace)}"]
        elif isinstance(step, _NestedStep):  # the nested plan's own function, called directly
            namespace[f"nested{n}"] = step.plan.write
            lines.append(f"    {target} = nested{n}(instance, current)")
        elif isinstance(step, _WholeStep):  # the field's method (a method field's own), called directly
            namespace[f"whole{n}"] = step.to_representation
            lines.append(f"    {target} = whole{n}(instance)")
        elif isinstance(step, _FieldStep):
            namespace[f"step{n}"] = step
            lines += ["    try:", f"        {target} = step{n}(instance, current)",
                      "    except SkipField:", "        pass"]
        else:  # a column with an odd name: never skipped
            namespace[f"step{n}"] = step
            lines.append(f"    {target} = step{n}(instance, current)")
    lines.append("    return document")
    exec(compile("\n".join(lines), "<representation plan>", "exec"), namespace)  # noqa: S102 - our own code
    return namespace["write"]


def _conversion(convert, n, namespace):
    """The expression converting ``value`` as ``convert(value, current)`` does."""
    if convert in _INLINE:
        return _INLINE[convert].format("value")
    if isinstance(convert, _Choice):  # ChoiceField.to_representation for a str, the field's own otherwise
        namespace[f"convert{n}"] = convert.field
        return (f"((value if value == '' else convert{n}.choice_strings_to_values.get(value, value)) "
                f"if value.__class__ is str else convert{n}.to_representation(value))")
    if isinstance(convert, _Boolean):  # BooleanField.to_representation for a bool, the field's own otherwise
        namespace[f"convert{n}"] = convert.to_representation
        return f"(value if value is True or value is False else convert{n}(value))"
    if isinstance(convert, _DateTime):  # an aware UTC value in a UTC call: ISO 8601 with Z, no call but one
        namespace.update({f"convert{n}": convert, "datetime": datetime, "UTC": dt_timezone.utc})
        return (f"(value.isoformat()[:-6] + 'Z' if value.__class__ is datetime and value.tzinfo is UTC "
                f"and current.utc else convert{n}(value, current))")
    if isinstance(convert, _ByField):  # the field's own method, without the converter's call
        namespace[f"convert{n}"] = convert.to_representation
        return f"convert{n}(value)"
    namespace[f"convert{n}"] = convert
    return f"convert{n}(value, current)"


class _FieldStep:
    """A field asked as DRF's Serializer.to_representation asks it."""

    def __init__(self, field):
        self.name, self.field = field.field_name, field

    def __call__(self, instance, current):
        attribute = self.field.get_attribute(instance)  # may raise SkipField
        check_for_none = attribute.pk if isinstance(attribute, PKOnlyObject) else attribute
        return None if check_for_none is None else self.field.to_representation(attribute)


class _ColumnStep:
    """A model column, converted by ``convert`` unless None."""

    def __init__(self, name, attname, convert):
        self.name, self.attname, self.read, self.convert = name, attname, attrgetter(attname), convert

    def __call__(self, instance, current):
        value = self.read(instance)
        return None if value is None else self.convert(value, current)


class _WholeStep:
    """A field over the whole object (``source="*"``): DRF hands it the object itself. A
    method field's own method is called in place of its ``to_representation``, which only
    looks that method up on the serializer."""

    def __init__(self, field):
        self.name, self.to_representation = field.field_name, field.to_representation
        if type(field).to_representation is serializers.SerializerMethodField.to_representation:
            self.to_representation = getattr(field.parent, field.method_name)

    def __call__(self, instance, current):
        return self.to_representation(instance)


class _NestedStep:
    """A nested plain serializer over the same object (``source="*"``)."""

    def __init__(self, field, model):
        self.name, self.plan = field.field_name, _Plan(field, model)

    def __call__(self, instance, current):
        return self.plan(instance, current)


def _step(field, model):
    if type(field).get_attribute is not _default_get_attribute(field):
        return _FieldStep(field)
    if field.source == "*":
        return _NestedStep(field, model) if _is_plain_nested(field) and model is not None else _WholeStep(field)
    column = _column_of(field, model)
    convert = _converter(field) if column is not None else None
    if convert is None:
        return _FieldStep(field)
    return _ColumnStep(field.field_name, column.attname, convert)


def _model_of(serializer):
    meta = getattr(serializer, "Meta", None)
    return getattr(meta, "model", None) if isinstance(serializer, serializers.ModelSerializer) else None


def _is_plain_nested(field):
    return (isinstance(field, serializers.Serializer) and not isinstance(field, serializers.ListSerializer)
            and type(field).to_representation is serializers.Serializer.to_representation)


def _column_of(field, model):
    """The model column a field shows directly, or None."""
    if model is None or field.source == "*" or len(field.source_attrs) != 1:
        return None
    try:
        column = model._meta.get_field(field.source_attrs[0])
    except Exception:  # a property, a method, a reverse relation: not a plain column
        return None
    if not column.concrete or column.many_to_many:
        return None
    if column.is_relation != isinstance(field, relations.RelatedField):
        return None
    return column


def _converter(field):
    """``convert(value, current)`` equal to ``field.to_representation(value)`` for a non-None
    value of the column: direct for the plain field classes, the field's own otherwise."""
    kind = type(field)
    if kind is serializers.CharField:
        return _as_text
    if kind is serializers.IntegerField:
        return _as_int
    if kind is serializers.FloatField:
        return _as_float
    if kind is serializers.BooleanField:
        return _Boolean(field.to_representation)
    if kind is serializers.UUIDField and field.uuid_format == "hex_verbose":
        return _as_text
    if kind is serializers.DateTimeField:
        return _datetime_converter(field)
    if kind is serializers.ChoiceField:
        return _Choice(field)
    if isinstance(field, relations.PrimaryKeyRelatedField) and field.pk_field is None and \
            kind.to_representation is relations.PrimaryKeyRelatedField.to_representation and \
            field.use_pk_only_optimization():
        return _as_is  # the foreign key's own column: the related object's pk
    if isinstance(field, relations.RelatedField):
        return None  # the column holds the related object's id, not what the field is given
    return _ByField(field.to_representation)


class _Choice:
    """A ChoiceField's column: _compile writes DRF's lookup of a plain text value inline."""

    __slots__ = ("field",)

    def __init__(self, field):
        self.field = field

    def __call__(self, value, current):
        return self.field.to_representation(value)


class _Boolean:
    """A BooleanField's column: _compile writes DRF's case of a bool inline."""

    __slots__ = ("to_representation",)

    def __init__(self, to_representation):
        self.to_representation = to_representation

    def __call__(self, value, current):
        return value if value is True or value is False else self.to_representation(value)


class _ByField:
    """A column shown by its field's own ``to_representation`` (called directly by _compile)."""

    __slots__ = ("to_representation",)

    def __init__(self, to_representation):
        self.to_representation = to_representation

    def __call__(self, value, current):
        return self.to_representation(value)


def _as_text(value, current):
    return str(value)


def _as_int(value, current):
    return int(value)


def _as_float(value, current):
    return float(value)


def _as_is(value, current):
    return value


# What _compile writes in place of a call to these converters ({} is the value).
_INLINE = {_as_text: "str({})", _as_int: "int({})", _as_float: "float({})", _as_is: "{}"}


def _default_get_attribute(field):
    return relations.RelatedField.get_attribute if isinstance(field, relations.RelatedField) \
        else fields.Field.get_attribute


def _datetime_converter(field):
    """ISO 8601 in the field's (or the current) timezone, ``Z`` for UTC, as DRF writes it;
    any other case (a format, a naive value, no USE_TZ) goes to the field itself."""
    output_format = getattr(field, "format", api_settings.DATETIME_FORMAT)
    if output_format is None or output_format.lower() != fields.ISO_8601 or not settings.USE_TZ:
        return _ByField(field.to_representation)
    if hasattr(field, "timezone"):  # a zone of its own (or None: naive output): the field's way
        return _ByField(field.to_representation)
    return _DateTime(field.to_representation)


class _DateTime:
    """A DateTimeField's column in the current timezone. _compile writes the common case
    inline (a value as stored, in UTC, while the current zone is UTC); this is the rest."""

    __slots__ = ("to_representation",)

    def __init__(self, to_representation):
        self.to_representation = to_representation

    def __call__(self, value, current):
        if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
            return self.to_representation(value)
        if value.tzinfo is dt_timezone.utc and current.utc:  # as stored: skip the conversion
            return value.replace(tzinfo=None).isoformat() + "Z"
        text = value.astimezone(current.zone).isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text
