"""What every API view shares: the caller (actor), rate-limit headers, audit, the
request's objects released when its response closes, and serializers that refuse unknown
fields."""

import copy
from collections.abc import Mapping

from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from .audit import audit
from .permissions import resolve_actor


class ApiViewMixin:
    """Mix into every API view (before the DRF base class)."""

    #: action -> least role (see permissions.required_role)
    required_roles = {}

    @property
    def actor(self):
        return resolve_actor(self.request)

    def audit(self, action, target=None, data=None):
        return audit(self.request, action, target, data)

    def get_serializer_context(self):
        context = super().get_serializer_context()
        context["actor"] = getattr(self.request, "actor", None)
        return context

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        quota = getattr(request, "rate_limit", None)
        if quota is not None:
            for name, value in quota.headers().items():
                response[name] = value
        # Django calls the closers when the server has sent the response (and then empties
        # the list, so this reference to the view goes too).
        response._resource_closers.append(self._release_request_objects)
        return response

    def _release_request_objects(self):
        """Break the reference cycle DRF leaves between the view, its Request and its
        Response (view.request, view.response, the handlers as_view binds on the view, the
        parser and renderer contexts that name the view, the request and the response), so
        reference counting frees them, and the page of rows they hold, as soon as the
        response is sent. Left as they are, every request's objects (~360 in cycles, the
        rows of a page hanging off them) waited for Python's cyclic garbage collector, which
        then walked them all: ~8 % of the web process's CPU under load (bench/README.md,
        "Open loop (issue 38)"). Nothing reads them after the response is closed."""
        response = self.__dict__.get("response")
        request = self.__dict__.get("request")
        if response is not None:
            getattr(response, "renderer_context", {}).clear()
        if request is not None and getattr(request, "parser_context", None):
            request.parser_context.clear()
        self.__dict__.clear()


class StrictFieldsMixin:
    # Unknown input fields are errors (code ``unknown_field``), not silently dropped.
    # Nested serializers using the mixin report their own unknown fields with full paths.
    # (A comment, not a docstring: the schema would show it as every serializer's description.)

    def to_internal_value(self, data):
        if isinstance(data, Mapping):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    {name: [ErrorDetail("Unknown field.", code="unknown_field")] for name in unknown}
                )
        return super().to_internal_value(data)


def copy_fields(fields):
    """A serializer's own copy of ``fields``, as DRF's deepcopy makes it but at a fraction of
    its cost (bench/README.md, "Figures behind the code"): binding a leaf field to its serializer only
    sets attributes on it, so a shallow copy is its own; a field that binds fields of its
    own (a nested serializer, a list or dict field's child, a many-related field) is deep-copied."""
    return {name: copy.deepcopy(field) if _binds_children(field) else _shallow_copy(field)
            for name, field in fields.items()}


def _shallow_copy(field):
    clone = object.__new__(type(field))  # what copy.copy does, without its generic protocol
    clone.__dict__.update(field.__dict__)
    return clone


def _binds_children(field):
    return (isinstance(field, serializers.BaseSerializer)
            or hasattr(field, "child") or hasattr(field, "child_relation"))


class StrictSerializer(StrictFieldsMixin, serializers.Serializer):
    def get_fields(self):
        return copy_fields(self._declared_fields)


class EmptySerializer(StrictSerializer):
    """Actions that take no body still refuse unknown fields."""


_field_prototypes = {}


class StrictModelSerializer(StrictFieldsMixin, serializers.ModelSerializer):
    # ModelSerializer builds its fields from the model's metadata for every serializer it
    # makes (every request); they depend only on the class, so they are built once and then
    # copied.

    def get_fields(self):
        prototype = _field_prototypes.get(type(self))
        if prototype is None:
            prototype = _field_prototypes.setdefault(type(self), super().get_fields())
        return copy_fields(prototype)
