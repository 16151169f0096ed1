import pytest
from django.db import connection

from apps.accounts import encryption
from cronsvc.crypto import Encryptor, InvalidToken, new_key


def raw_column(table, column, pk):
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {column} FROM {table} WHERE id = %s", [pk])
        return cursor.fetchone()[0]


def test_job_auth_is_encrypted_at_rest(tenant, make_job):
    job = make_job(tenant, auth={"type": "bearer", "token": "tok-very-secret"})
    stored = raw_column("jobs_job", "auth", job.pk)
    assert "tok-very-secret" not in stored
    job.refresh_from_db()
    assert job.auth == {"type": "bearer", "token": "tok-very-secret"}


def test_project_signing_secret_is_made_and_encrypted(tenant):
    project = tenant.project
    project.refresh_from_db()
    (secret,) = project.signing_secrets
    assert secret.startswith("whsec_")
    assert secret not in raw_column("projects_project", "signing_secrets", project.pk)


def test_values_written_under_an_old_key_stay_readable_after_a_new_key_is_added(settings, tenant, make_job):
    job = make_job(tenant, auth={"type": "basic", "username": "u", "password": "p"})
    old_keys = list(settings.ENCRYPTION_KEYS)
    settings.ENCRYPTION_KEYS = [new_key(), *old_keys]
    job.refresh_from_db()
    assert job.auth["password"] == "p"
    stored = raw_column("jobs_job", "auth", job.pk)
    assert not encryption.encryptor().is_current(stored)
    job.save()
    assert encryption.encryptor().is_current(raw_column("jobs_job", "auth", job.pk))


def test_a_removed_key_cannot_decrypt():
    old, new = Encryptor([new_key()]), Encryptor([new_key()])
    with pytest.raises(InvalidToken):
        new.decrypt(old.encrypt("x"))


def test_a_token_decrypts_to_its_text_again_and_only_under_its_keys():
    """Encryptor keeps the texts of the tokens it decrypted (DECRYPTED_KEPT): the same
    text again, a tampered token still refused, and another key set does not read it."""
    encryptor, other = Encryptor([new_key()]), Encryptor([new_key()])
    token = encryptor.encrypt('{"secret": 1}')
    assert encryptor.decrypt(token) == encryptor.decrypt(token) == '{"secret": 1}'
    with pytest.raises(InvalidToken):
        other.decrypt(token)
    with pytest.raises(InvalidToken):
        encryptor.decrypt(token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB"))
    encryptor.DECRYPTED_KEPT = 2
    tokens = [encryptor.encrypt(str(n)) for n in range(5)]
    assert [encryptor.decrypt(t) for t in tokens] == ["0", "1", "2", "3", "4"]
    assert len(encryptor._decrypted) <= 2
