"""A URLconf whose only view fails while holding a customer's secrets (test_sentry.py).

The secrets are assembled at import, as if read from the database: Sentry sends source
lines with each frame, and a literal in the source would be found there instead."""

from django.urls import path

PASSWORD = "-".join(["hunter2", "password"])
SIGNING_SECRET = "whsec_" + "c2VjcmV0LXNpZ25pbmcta2V5"
API_KEY = "csk_live_" + "ABCDEFGH12345678secret"
BEARER = "Bearer " + "customer-api-token"
SESSION = "sessionid=" + "abc123session"
CUSTOM_TOKEN = "tok-987-" + "header"
BODY_SECRET = "body-secret-" + "value"
SECRETS = (PASSWORD, SIGNING_SECRET, API_KEY, BEARER.split()[1], SESSION.split("=")[1], CUSTOM_TOKEN, BODY_SECRET)


def explode(request):
    job_auth = {"type": "basic", "username": "ops", "password": PASSWORD}  # noqa: F841 - in the frame
    signing_secret = SIGNING_SECRET  # noqa: F841
    note = f"signing with {SIGNING_SECRET} for {API_KEY}"  # noqa: F841
    raise RuntimeError(f"delivery exploded for {API_KEY}")


urlpatterns = [path("boom", explode)]
