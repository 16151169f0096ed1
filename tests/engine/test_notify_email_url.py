"""EMAIL_URL parsing."""

import pytest

from cronsvc.notify.email_url import parse_email_url


def test_smtp_with_starttls():
    config = parse_email_url("smtp://user%40x.com:p%3Ass@mail.example.com:587?tls=1&timeout=7")
    assert config == {
        "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend", "EMAIL_HOST": "mail.example.com",
        "EMAIL_PORT": 587, "EMAIL_HOST_USER": "user@x.com", "EMAIL_HOST_PASSWORD": "p:ss", "EMAIL_USE_TLS": True,
        "EMAIL_USE_SSL": False, "EMAIL_TIMEOUT": 7,
    }


def test_smtps_defaults_to_port_465_and_ssl():
    config = parse_email_url("smtps://mail.example.com")
    assert config["EMAIL_PORT"] == 465 and config["EMAIL_USE_SSL"] and not config["EMAIL_USE_TLS"]


@pytest.mark.parametrize("url,backend", [("console://", "console"), ("locmem://", "locmem"), ("dummy://", "dummy")])
def test_simple_backends(url, backend):
    assert parse_email_url(url) == {"EMAIL_BACKEND": f"django.core.mail.backends.{backend}.EmailBackend"}


def test_file_backend_path():
    assert parse_email_url("file:///tmp/mails")["EMAIL_FILE_PATH"] == "/tmp/mails"


@pytest.mark.parametrize("url", ["smtp://h?tls=maybe", "imap://h", "smtp://h?tls=1&ssl=1"])
def test_bad_urls_are_refused(url):
    with pytest.raises(ValueError):
        parse_email_url(url)
