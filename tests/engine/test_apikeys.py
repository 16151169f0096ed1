from cronsvc.apikeys import KEY_PREFIX, generate_key, secret_matches, split_key


def test_generated_key_verifies_and_only_its_hash_is_kept():
    new = generate_key()
    assert new.full_key.startswith(KEY_PREFIX + new.lookup)
    lookup, secret = split_key(new.full_key)
    assert lookup == new.lookup
    assert secret_matches(secret, new.salt, new.secret_hash)
    assert secret not in new.secret_hash


def test_a_changed_secret_or_salt_does_not_verify():
    new = generate_key()
    _, secret = split_key(new.full_key)
    assert not secret_matches(secret[:-1] + ("A" if secret[-1] != "A" else "B"), new.salt, new.secret_hash)
    assert not secret_matches(secret, "other-salt", new.secret_hash)


def test_malformed_keys_are_not_split():
    assert split_key(None) is None
    assert split_key("csk_live_short") is None
    assert split_key("sk_live_" + "a" * 48) is None
    assert split_key(KEY_PREFIX + "!" * 48) is None


def test_keys_are_unique():
    assert len({generate_key().full_key for _ in range(200)}) == 200
