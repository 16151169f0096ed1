"""The test provider's claims: the user's e-mail (verified) and name, and two deliberately
broken applications, chosen by their name, for the refusal tests:
"wrong-audience" issues ID tokens for another client id, "expired" issues ID tokens that
expired ten minutes before they were issued."""

import time

from oauth2_provider.oauth2_validators import OAuth2Validator


class TestProviderValidator(OAuth2Validator):
    def get_additional_claims(self, request):
        user = request.user
        return {"email": user.email, "email_verified": True, "given_name": user.first_name,
                "family_name": user.last_name}

    def get_id_token_dictionary(self, token, token_handler, request):
        claims, expiration_time = super().get_id_token_dictionary(token, token_handler, request)
        if request.client.name == "expired":
            claims["exp"] = int(time.time()) - 600
        return claims, expiration_time

    def finalize_id_token(self, id_token, token, token_handler, request):
        if request.client.name == "wrong-audience":
            id_token["aud"] = "another-service"
        return super().finalize_id_token(id_token, token, token_handler, request)
