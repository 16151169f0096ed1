"""Query parameters every endpoint reads the same way."""

from rest_framework.exceptions import ErrorDetail, ValidationError

_YES, _NO = ("true", "1"), ("false", "0", "")


def query_flag(request, name):
    """A yes/no query parameter (``?force=true``): ``flag`` of its value."""
    return flag(name, request.query_params.get(name), spelled=f"?{name}")


def flag(name, raw, *, spelled=None):
    """A yes/no value, in a query (``?force=true``) or a form field (the pages' ``force``
    checkbox): true or 1 (any case) is yes; false, 0, empty or absent is no; anything else
    is refused (400 ``invalid_flag``) rather than read as no."""
    value = "" if raw is None else raw.lower()
    if value in _YES or value in _NO:
        return value in _YES
    spelled = spelled or name
    raise ValidationError({name: [ErrorDetail(f"{spelled}={raw} is not a yes/no value: use {spelled}=true or "
                                              f"{spelled}=false (1 and 0 work too).", code="invalid_flag")]})
