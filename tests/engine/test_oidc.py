"""The ID token's checks (cronsvc.oidc) on tokens signed here: each refusal has its code."""

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, OctKey, RSAKey

from cronsvc import oidc

NOW = 1_800_000_000
ISSUER = "https://idp.example.com/realms/main"
KEY = RSAKey.generate_key(2048, parameters={"kid": "k1"})
KEYS = KeySet.import_key_set({"keys": [KEY.as_dict(private=False)]})


def token(key=KEY, alg="RS256", **overrides):
    claims = {"iss": ISSUER, "aud": "cronsvc", "sub": "u-1", "iat": NOW - 5, "exp": NOW + 300, "nonce": "n-1",
              "email": "Alice@Example.com", "email_verified": True}
    claims.update(overrides)
    claims = {k: v for k, v in claims.items() if v is not None}
    return jwt.encode({"alg": alg, "kid": "k1"}, claims, key, algorithms=[alg])


def check(value, **kwargs):
    args = {"issuer": ISSUER + "/", "client_id": "cronsvc", "nonce": "n-1", "now": NOW}
    args.update(kwargs)
    return oidc.validate_id_token(value, KEYS, **args)


def refused(value, **kwargs):
    with pytest.raises(oidc.OIDCError) as caught:
        check(value, **kwargs)
    return caught.value.code


def test_a_right_token_gives_its_claims_and_its_verified_email():
    claims = check(token())
    assert claims["sub"] == "u-1" and oidc.verified_email(claims) == "alice@example.com"


@pytest.mark.parametrize("overrides, code", [
    ({"aud": "another-service"}, "sso_wrong_audience"),
    ({"aud": ["cronsvc", "another-service"]}, "sso_wrong_audience"),  # several audiences, no azp naming us
    ({"aud": "cronsvc", "azp": "another-service"}, "sso_wrong_audience"),
    ({"iss": "https://evil.example.com"}, "sso_issuer_mismatch"),
    ({"nonce": "n-2"}, "sso_nonce_mismatch"),
    ({"nonce": None}, "sso_nonce_mismatch"),
    ({"exp": NOW - 61}, "sso_token_expired"),
    ({"iat": NOW + 3600}, "sso_invalid_token"),
    ({"sub": None}, "sso_invalid_token"),
])
def test_a_wrong_claim_is_refused_with_its_code(overrides, code):
    assert refused(token(**overrides)) == code


def test_several_audiences_are_accepted_when_azp_names_us():
    assert check(token(aud=["cronsvc", "api"], azp="cronsvc"))["azp"] == "cronsvc"


def test_exp_and_iat_allow_a_small_clock_skew():
    assert check(token(exp=NOW - 30, iat=NOW + 30))
    assert refused(token(), now=NOW + 300 + oidc.LEEWAY_SECONDS) == "sso_token_expired"


def test_a_token_signed_with_another_key_is_refused():
    other = RSAKey.generate_key(2048, parameters={"kid": "k1"})
    assert refused(token(key=other)) == "sso_bad_signature"


def test_a_symmetric_or_unsigned_token_is_refused():
    # HS256 with the public key's bytes as the secret is the classic confusion attack.
    forged = token(key=OctKey.import_key(b"x" * 32), alg="HS256")
    assert refused(forged) == "sso_invalid_token"
    assert refused("not.a.jwt") == "sso_invalid_token"


@pytest.mark.parametrize("claims, code", [
    ({"email_verified": False, "email": "a@example.com"}, "sso_email_unverified"),
    ({}, "sso_email_missing"),
    ({"email": "no-at-sign"}, "sso_email_missing"),
])
def test_an_unusable_email_is_refused(claims, code):
    with pytest.raises(oidc.OIDCError) as caught:
        oidc.verified_email(claims)
    assert caught.value.code == code


def test_domains_are_parsed_from_commas_or_spaces():
    assert oidc.parse_domains(" Example.com, @example.org  example.com ") == ["example.com", "example.org"]
    assert oidc.email_domain("Bob@Sub.Example.COM") == "sub.example.com"


def test_the_authorization_request_carries_state_nonce_and_an_s256_challenge():
    meta = oidc.ProviderMetadata(ISSUER, f"{ISSUER}/auth?kc=1", f"{ISSUER}/token", f"{ISSUER}/jwks")
    one = oidc.authorization_request(meta, client_id="cronsvc", redirect_uri="https://c.example/sso/callback/")
    two = oidc.authorization_request(meta, client_id="cronsvc", redirect_uri="https://c.example/sso/callback/")
    assert one.state != two.state and one.nonce != two.nonce and one.code_verifier != two.code_verifier
    assert one.url.startswith(f"{ISSUER}/auth?kc=1&response_type=code&")
    assert f"code_challenge={oidc._pkce_challenge(one.code_verifier)}" in one.url and "code_challenge_method=S256" in one.url
    assert one.code_verifier not in one.url
