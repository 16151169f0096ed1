"""OpenID Connect relying party: discovery, the authorization request (state, nonce, PKCE),
the code exchange and the ID token's checks. No Django here.

Signatures, JWKS key selection and the registered claims (exp, iat, nbf) are checked by
joserfc; this module says which values are expected (RFC 8414 / OIDC Core 3.1.3.7): the
issuer exactly as configured, our client id as the audience, our nonce, a verified e-mail.
HTTP goes through an urllib3-style ``http`` object the caller passes, ``GuardedHTTP`` in
production: the issuer URL and the endpoints the provider names are customer input, so each
passes the outbound address guard (the platform's one policy) before it is fetched and at
connect time, as a job's URL does. A guard refusal is an OIDCError
``sso_provider_unreachable`` whose ``__cause__`` is the guard's ForbiddenTarget.

Every refusal is an OIDCError whose ``code`` is stable (the pages and the audit log show it).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from joserfc import errors as jose_errors
from joserfc import jwt
from joserfc.jwk import KeySet

from cronsvc.delivery.guard import AddressPolicy, check_url
from cronsvc.delivery.transport import guarded_pool_manager

# Clock skew tolerated between the provider and us on exp/iat/nbf, in seconds.
LEEWAY_SECONDS = 60
HTTP_TIMEOUT_SECONDS = 10
MAX_DOCUMENT_BYTES = 256 * 1024
# Asymmetric algorithms only: with HS256 the "key" would be our client secret, shared with
# whoever configured the client, and "none" is never acceptable.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
SCOPE = "openid email profile"


class OIDCError(Exception):
    """A refused sign-in: ``code`` is machine-readable, the message says what to do."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ProviderMetadata:
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str


@dataclass(frozen=True)
class AuthorizationRequest:
    """What the browser is sent to, and what we keep until the provider sends it back."""

    url: str
    state: str
    nonce: str
    code_verifier: str


class GuardedHTTP:
    """The urllib3-style ``http`` of the functions below, behind ``policy``: every URL passes
    ``check_url`` (scheme, credentials, port, host syntax, IP literals) before the request,
    and every connection ``open_connection`` (the resolved addresses), as deliveries do."""

    def __init__(self, policy: AddressPolicy, **pool_kwargs: Any) -> None:
        self.policy = policy
        self._pool = guarded_pool_manager(policy, **pool_kwargs)

    def request(self, method: str, url: str, **kwargs: Any) -> Any:
        check_url(url, self.policy)
        return self._pool.request(method, url, **kwargs)


def normalize_issuer(issuer: str) -> str:
    return issuer.strip().rstrip("/")


def _get_json(http: Any, method: str, url: str, what: str, **kwargs: Any) -> dict[str, Any]:
    try:
        response = http.request(method, url, timeout=HTTP_TIMEOUT_SECONDS, redirect=False,
                                preload_content=False, **kwargs)
        body = response.read(MAX_DOCUMENT_BYTES + 1)
        response.release_conn()
    except Exception as exc:  # connection refused, guard refusal, timeout, TLS...
        raise OIDCError("sso_provider_unreachable",
                        f"The identity provider's {what} could not be fetched ({type(exc).__name__}: {exc}).") from exc
    if len(body) > MAX_DOCUMENT_BYTES:
        raise OIDCError("sso_provider_error", f"The identity provider's {what} is too large.")
    try:
        document = json.loads(body)
    except ValueError as exc:
        raise OIDCError("sso_provider_error",
                        f"The identity provider's {what} is not JSON (HTTP {response.status}).") from exc
    if not isinstance(document, dict):
        raise OIDCError("sso_provider_error", f"The identity provider's {what} is not a JSON object.")
    if response.status >= 400:
        detail = document.get("error_description") or document.get("error") or ""
        raise OIDCError("sso_provider_error",
                        f"The identity provider refused the {what} request (HTTP {response.status}) {detail}".strip())
    return document


def discover(http: Any, issuer: str) -> ProviderMetadata:
    """The provider's /.well-known/openid-configuration, whose issuer must be ours exactly."""
    issuer = normalize_issuer(issuer)
    document = _get_json(http, "GET", f"{issuer}/.well-known/openid-configuration", "discovery document")
    if normalize_issuer(str(document.get("issuer", ""))) != issuer:
        raise OIDCError("sso_issuer_mismatch",
                        f"The discovery document names issuer {document.get('issuer')!r}, not {issuer!r}: "
                        "check the issuer URL in the single sign-on settings.")
    try:
        return ProviderMetadata(issuer=issuer,
                                authorization_endpoint=str(document["authorization_endpoint"]),
                                token_endpoint=str(document["token_endpoint"]),
                                jwks_uri=str(document["jwks_uri"]))
    except KeyError as exc:
        raise OIDCError("sso_provider_error", f"The discovery document has no {exc.args[0]}.") from exc


def _pkce_challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def authorization_request(metadata: ProviderMetadata, *, client_id: str, redirect_uri: str,
                          login_hint: str = "") -> AuthorizationRequest:
    """The authorization code request with a fresh state, nonce and S256 PKCE verifier."""
    state, nonce, verifier = secrets.token_urlsafe(32), secrets.token_urlsafe(32), secrets.token_urlsafe(48)
    params = {"response_type": "code", "client_id": client_id, "redirect_uri": redirect_uri, "scope": SCOPE,
              "state": state, "nonce": nonce, "code_challenge": _pkce_challenge(verifier),
              "code_challenge_method": "S256"}
    if login_hint:
        params["login_hint"] = login_hint
    separator = "&" if "?" in metadata.authorization_endpoint else "?"
    return AuthorizationRequest(url=f"{metadata.authorization_endpoint}{separator}{urlencode(params)}",
                                state=state, nonce=nonce, code_verifier=verifier)


def exchange_code(http: Any, metadata: ProviderMetadata, *, code: str, client_id: str, client_secret: str,
                  redirect_uri: str, code_verifier: str) -> str:
    """The code for tokens at the token endpoint (client_secret_basic); returns the ID token."""
    basic = base64.b64encode(f"{_form(client_id)}:{_form(client_secret)}".encode()).decode("ascii")
    body = urlencode({"grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri,
                      "code_verifier": code_verifier})
    tokens = _get_json(http, "POST", metadata.token_endpoint, "token", body=body,
                       headers={"Authorization": f"Basic {basic}", "Accept": "application/json",
                                "Content-Type": "application/x-www-form-urlencoded"})
    id_token = tokens.get("id_token")
    if not isinstance(id_token, str) or not id_token:
        raise OIDCError("sso_provider_error", "The identity provider returned no ID token: is the openid scope allowed?")
    return id_token


def _form(value: str) -> str:
    # RFC 6749 2.3.1: the client id and secret are form-encoded before Basic encoding.
    return urlencode({"": value})[1:]


def fetch_keys(http: Any, metadata: ProviderMetadata) -> KeySet:
    document = _get_json(http, "GET", metadata.jwks_uri, "signing keys (JWKS)")
    try:
        return KeySet.import_key_set(document)
    except (jose_errors.JoseError, ValueError, TypeError, KeyError) as exc:
        raise OIDCError("sso_provider_error", f"The identity provider's signing keys are unusable ({exc}).") from exc


def validate_id_token(id_token: str, keys: KeySet, *, issuer: str, client_id: str, nonce: str, now: int,
                      leeway: int = LEEWAY_SECONDS) -> dict[str, Any]:
    """The ID token's claims once its signature, issuer, audience, times and nonce are right."""
    try:
        token = jwt.decode(id_token, keys, algorithms=list(ALGORITHMS))
    except jose_errors.BadSignatureError as exc:
        raise OIDCError("sso_bad_signature", "The ID token's signature does not verify with the provider's keys.") from exc
    except jose_errors.JoseError as exc:  # malformed, unknown key id, an algorithm we refuse
        raise OIDCError("sso_invalid_token", f"The ID token is not usable ({exc}).") from exc
    claims = token.claims
    registry = jwt.JWTClaimsRegistry(
        now=now, leeway=leeway,
        iss={"essential": True, "value": normalize_issuer(issuer)},
        sub={"essential": True}, exp={"essential": True}, iat={"essential": True},
    )
    claims = {**claims, "iss": normalize_issuer(str(claims.get("iss", "")))}
    try:
        registry.validate(claims)
    except jose_errors.ExpiredTokenError as exc:
        raise OIDCError("sso_token_expired", "The identity provider's ID token has expired: sign in again "
                        "(if it happens every time, check the clocks of the provider and of this server).") from exc
    except jose_errors.ClaimError as exc:
        if exc.claim == "iss":
            raise OIDCError("sso_issuer_mismatch",
                            f"The ID token was issued by {claims.get('iss')!r}, not by {issuer!r}.") from exc
        raise OIDCError("sso_invalid_token", f"The ID token's {exc.claim!r} claim is missing or wrong.") from exc
    _check_audience(claims, client_id)
    if not isinstance(claims.get("nonce"), str) or not secrets.compare_digest(claims["nonce"], nonce):
        raise OIDCError("sso_nonce_mismatch", "The ID token does not answer this sign-in (nonce mismatch): "
                        "start the sign-in again.")
    return claims


def _check_audience(claims: dict[str, Any], client_id: str) -> None:
    """aud must be our client id; with several audiences, azp must name us (OIDC Core 3.1.3.7)."""
    audience = claims.get("aud")
    audiences = [audience] if isinstance(audience, str) else audience if isinstance(audience, list) else []
    ok = client_id in audiences and (len(audiences) == 1 or claims.get("azp") == client_id)
    if not ok or ("azp" in claims and claims["azp"] != client_id):
        raise OIDCError("sso_wrong_audience",
                        f"The ID token was issued for {audience!r}, not for this service's client id: check the "
                        "client id in the single sign-on settings.")


def verified_email(claims: dict[str, Any]) -> str:
    """The e-mail address the provider vouches for (email_verified, when present, must be true)."""
    email = claims.get("email")
    if not isinstance(email, str) or "@" not in email:
        raise OIDCError("sso_email_missing", "The identity provider sent no e-mail address: allow the "
                        "'email' scope for this application at the provider.")
    if "email_verified" in claims and claims["email_verified"] is not True:
        raise OIDCError("sso_email_unverified", "The identity provider says this e-mail address is not verified.")
    return email.strip().lower()


def email_domain(email: str) -> str:
    return email.rpartition("@")[2].strip().lower()


def parse_domains(text: str) -> list[str]:
    """'example.com, Example.org' -> ['example.com', 'example.org'] (commas or spaces)."""
    return sorted({part.strip().lower().lstrip("@") for part in text.replace(",", " ").split() if part.strip()})
