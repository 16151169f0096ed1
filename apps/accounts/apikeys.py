"""Making an API key (the key itself is cronsvc.apikeys': lookup, salt, secret hash)."""

from cronsvc.apikeys import generate_key

from .models import ApiKey


def create_api_key(organization, name, *, scopes=("read", "write"), created_by=None, expires_at=None):
    """Return (ApiKey, full key). The full key exists only in this return value."""
    new = generate_key()
    key = ApiKey.objects.create(
        organization=organization, name=name, lookup=new.lookup, salt=new.salt,
        secret_hash=new.secret_hash, scopes=list(scopes), created_by=created_by,
        expires_at=expires_at,
    )
    return key, new.full_key
