"""Tenancy in one place: every tenant-owned model's manager scopes by organization."""

from django.db import models


class TenantQuerySet(models.QuerySet):
    #: the lookup path from the model to its Organization, set per model.
    tenant_path = "organization"

    def for_organization(self, organization):
        return self.filter(**{self.tenant_path: organization})


def tenant_manager(path):
    """A manager whose querysets scope by ``path`` (e.g. ``"project__organization"``)."""
    queryset_class = type("ScopedQuerySet", (TenantQuerySet,), {"tenant_path": path})
    return queryset_class.as_manager()
