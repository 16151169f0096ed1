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


def test_one_character_outside_the_alphabet_anywhere_refuses_the_key():
    body = generate_key().full_key[len(KEY_PREFIX):]
    for bad in ("!", "é", "٣", " ", "-"):  # a non-ASCII digit or letter is no more ours than "!"
        for at in (0, 20, len(body) - 1):
            assert split_key(KEY_PREFIX + body[:at] + bad + body[at + 1:]) is None, (bad, at)


def test_splitting_a_key_makes_no_python_call_per_character():
    """Checked on every authenticated request: a set test, not a generator over 48 characters."""
    import sys

    key = generate_key().full_key
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        calls += event == "call"

    sys.setprofile(count)
    try:
        split_key(key)
    finally:
        sys.setprofile(None)
    assert calls <= 2, calls  # split_key itself
