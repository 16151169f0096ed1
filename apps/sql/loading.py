"""Model instances loaded without ``Model.__init__``, for the rows an API page reads by the
fifty (jobs, executions).

Django builds a loaded row by calling ``Model(*values)``, whose Python loop sets every field
one ``setattr`` at a time (about 60 calls a job) and sends pre_init and post_init. For a
row nobody listens to those signals for, ``QuickLoad.from_db`` fills the instance's
``__dict__`` in one C call instead: the same attributes, the same ``_state``, the same
instance (tests/foundation/test_quick_load.py compares them), deferred columns left out of
``__dict__`` as ``__init__`` leaves them (a worker's claim loads some columns of each run).
An init signal receiver, or a model with an ``__init__`` of its own, goes the ordinary way.
"""

from django.db import models
from django.db.models import signals
from django.db.models.base import ModelState


class QuickLoad:
    """Mix into a model (before ``models.Model``) whose rows are read many at a time."""

    @classmethod
    def from_db(cls, db, field_names, values):
        attnames = cls._quick_attnames()
        listened = (signals.pre_init.receivers or signals.post_init.receivers) and (
            signals.pre_init.has_listeners(cls) or signals.post_init.has_listeners(cls))
        if attnames is not None and len(values) != len(attnames) and field_names is not None:
            attnames = cls._quick_loaded(tuple(field_names))  # some columns deferred
        if attnames is None or len(values) != len(attnames) or listened:
            return super().from_db(db, field_names, values)
        new = cls.__new__(cls)
        state = ModelState()
        state.adding, state.db = False, db
        new.__dict__["_state"] = state
        new.__dict__.update(zip(attnames, values))
        return new

    @classmethod
    def _quick_loaded(cls, field_names):
        """The attnames of the columns loaded, in field order as ``Model.from_db`` takes
        their values (the others are deferred: absent from ``__dict__``, loaded when read)."""
        cache = cls.__dict__.get("_quick_loaded_cache")
        if cache is None:
            cache = cls._quick_loaded_cache = {}
        attnames = cache.get(field_names)
        if attnames is None:
            wanted = set(field_names)
            attnames = cache[field_names] = tuple(name for name in cls._quick_attnames() if name in wanted)
        return attnames

    @classmethod
    def _quick_attnames(cls):
        attnames = cls.__dict__.get("_quick_attnames_cache")
        if "_quick_attnames_cache" not in cls.__dict__:
            # Per class (a subclass has fields of its own), once the models are ready. A class
            # whose __init__ is not Django's would be skipped by a quick load: None, never quick.
            own_init = cls.__init__ is not models.Model.__init__
            attnames = None if own_init else tuple(field.attname for field in cls._meta.concrete_fields)
            cls._quick_attnames_cache = attnames
        return attnames
