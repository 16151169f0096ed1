"""Static files: hashed, compressed names from collectstatic's manifest, served by whitenoise.

A host that never ran collectstatic (a release step skipped, a Procfile host whose release
runs in another container) has no manifest. Django's manifest storage then raises on every
``{% static %}``, so every page answered 500. Here a missing manifest means plain names,
which whitenoise serves from the apps' own folders (``WHITENOISE_USE_FINDERS``): the pages
work, without far-future caching, and the log says how to get it back.
"""

import logging

from whitenoise.storage import CompressedManifestStaticFilesStorage

log = logging.getLogger(__name__)


class StaticFilesStorage(CompressedManifestStaticFilesStorage):
    def stored_name(self, name):
        if not self.hashed_files:
            return name
        return super().stored_name(name)


def manifest_missing(static_root):
    return not (static_root / "staticfiles.json").exists()


def warn_if_uncollected(static_root):
    if manifest_missing(static_root):
        log.warning("static files were not collected into %s: serving them from the apps' folders "
                    "without long-lived caching; run `python manage.py collectstatic --noinput` "
                    "(the Procfile's release step does)", static_root)
