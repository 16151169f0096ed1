"""Re-encrypt every encrypted field under the newest key of ENCRYPTION_KEYS.

Every ``EncryptedField`` (JSON secrets, TOTP seeds) of every installed model is found
generically, so a model added later is rotated without touching this module. Rows are read
by primary-key cursor in batches, each batch in its own transaction; values already under
the newest key are skipped, so an interrupted run is resumed by running it again (or from
``after``).
Once ``pending()`` reports nothing, the old keys can be removed from ENCRYPTION_KEYS.
"""

from dataclasses import dataclass

from django.apps import apps
from django.db import transaction
from django.db.models import F, TextField, Value
from django.db.models.functions import Cast

from .encryption import EncryptedField, encryptor


@dataclass
class Progress:
    model: str
    last_pk: object
    rotated: int
    checked: int


def encrypted_fields():
    """[(model, [field names])] for every model holding encrypted values."""
    found = []
    for model in apps.get_models():
        names = [f.name for f in model._meta.concrete_fields if isinstance(f, EncryptedField)]
        if names:
            found.append((model, names))
    return found


def label(model):
    return model._meta.label


def _raw_rows(model, names, after, batch_size):
    """Primary keys and the stored tokens (not decrypted) of the next batch."""
    queryset = model._base_manager.order_by("pk")
    if after is not None:
        queryset = queryset.filter(pk__gt=after)
    raw = {f"raw_{name}": Cast(F(name), output_field=TextField()) for name in names}
    return list(queryset.annotate(**raw).values("pk", *raw)[:batch_size])


def rotate_model(model, names, *, batch_size=500, after=None):
    """Rotate one model's encrypted columns; yields Progress after each batch."""
    crypto = encryptor()
    while True:
        with transaction.atomic():
            rows = _raw_rows(model, names, after, batch_size)
            if not rows:
                return
            rotated = 0
            for row in rows:
                changes = {name: Value(crypto.rotate(row[f"raw_{name}"]), output_field=TextField())
                           for name in names if row[f"raw_{name}"] and not crypto.is_current(row[f"raw_{name}"])}
                if changes:
                    model._base_manager.filter(pk=row["pk"]).update(**changes)
                    rotated += 1
            after = rows[-1]["pk"]
        yield Progress(label(model), after, rotated, len(rows))


def pending():
    """{model label: values not yet under the newest key}."""
    crypto = encryptor()
    counts = {}
    for model, names in encrypted_fields():
        raw = {f"raw_{name}": Cast(F(name), output_field=TextField()) for name in names}
        stale = 0
        for row in model._base_manager.annotate(**raw).values(*raw).iterator(chunk_size=1000):
            stale += sum(1 for token in row.values() if token and not crypto.is_current(token))
        if stale:
            counts[label(model)] = stale
    return counts
