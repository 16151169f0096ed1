"""Handing an archive part to an owner or admin: streamed through the web process, or a
302 to a short-lived presigned URL (ARCHIVE_PRESIGNED_DOWNLOADS). Shared by the API, the
settings page and the admin."""

from django.conf import settings
from django.http import HttpResponseRedirect, StreamingHttpResponse

from cronsvc.archives import CONTENT_TYPE, ArchiveReadFailed

from .writing import archive_store


class ArchivesUnavailable(Exception):
    """Archiving is off here or the object store did not answer."""


def archive_response(archive):
    store = archive_store()
    if store is None:
        raise ArchivesUnavailable("Archive storage is not configured on this installation (ARCHIVE_S3_BUCKET).")
    try:
        if settings.ARCHIVE_PRESIGNED_DOWNLOADS:
            return HttpResponseRedirect(store.presigned_url(
                archive.key, seconds=settings.ARCHIVE_PRESIGNED_URL_SECONDS, filename=archive.filename))
        chunks = store.open(archive.key)
    except ArchiveReadFailed as exc:
        raise ArchivesUnavailable("The archive storage did not return the archive; try again later.") from exc
    response = StreamingHttpResponse(chunks, content_type=CONTENT_TYPE)
    response["Content-Length"] = str(archive.bytes)
    response["Content-Disposition"] = f'attachment; filename="{archive.filename}"'
    response["X-Archive-SHA256"] = archive.sha256
    return response
