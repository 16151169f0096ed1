"""Making an API key (the key itself is cronsvc.apikeys': lookup, salt, secret hash)."""

from cronsvc.apikeys import generate_key

from .audit import audited
from .models import ApiKey


@audited
def create_api_key(organization, name, *, scopes=("read", "write"), created_by=None, expires_at=None,
                   project_ids=None, audit):
    """Return (ApiKey, full key). The full key exists only in this return value. ``project_ids``:
    the projects it reaches, None for every one."""
    new = generate_key()
    key = ApiKey.objects.create(
        organization=organization, name=name, lookup=new.lookup, salt=new.salt,
        secret_hash=new.secret_hash, scopes=list(scopes), created_by=created_by,
        expires_at=expires_at,
    )
    if project_ids is not None:
        key.limited_to_projects = True
        key.save(update_fields=["limited_to_projects"])
        key.projects.set(project_ids)
    audit("api_key.create", key, {"name": key.name, "scopes": key.scopes})
    return key, new.full_key
