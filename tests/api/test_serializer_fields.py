"""Each serializer binds fields of its own (apps.api.base.copy_fields): copied
shallowly or deeply, no field, nested serializer or child is shared between two of them,
so concurrent requests cannot see each other's parent or context."""

from apps.jobs.serializers import JobSerializer


def _fields_of(serializer, path=()):
    """(path, field) for every field reachable from ``serializer``, nested ones included."""
    for name, field in serializer.fields.items():
        yield path + (name,), field
        child = getattr(field, "child", None)
        if child is not None:
            yield path + (name, "child"), child
            if hasattr(child, "fields"):
                yield from _fields_of(child, path + (name, "child"))
        if hasattr(field, "fields"):
            yield from _fields_of(field, path + (name,))


def test_two_serializers_share_no_field_and_each_is_bound_to_its_own():
    first = JobSerializer(context={"request": "first"})
    second = JobSerializer(context={"request": "second"})
    first_fields, second_fields = dict(_fields_of(first)), dict(_fields_of(second))
    assert first_fields.keys() == second_fields.keys()
    assert {"name", ("request", "url"), ("tags", "child"), ("dependencies", "child", "on")} <= {
        path[0] if len(path) == 1 else path for path in first_fields}
    for path, field in first_fields.items():
        assert field is not second_fields[path], path
        assert field.root is first and second_fields[path].root is second, path
        assert field.context == {"request": "first"}, path


def test_a_copied_field_keeps_its_own_binding():
    first, second = JobSerializer(), JobSerializer()
    assert (first.fields["name"].field_name, first.fields["name"].parent) == ("name", first)
    assert second.fields["name"].parent is second
    assert first.fields["description_human"].method_name == "get_description_human"
