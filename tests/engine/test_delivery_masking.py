"""One list of credential headers and one mask, for request copies and responses alike."""

from cronsvc.delivery.masking import MASK, masked


def test_credential_headers_are_masked_whatever_their_case():
    headers = {"Authorization": "Bearer t", "set-cookie": "s=1", "X-API-Key": "k", "Api-Key": "k2",
               "Cookie": "c", "Proxy-Authorization": "p", "X-Team": "data"}
    assert masked(headers) == {**{name: MASK for name in headers}, "X-Team": "data"}


def test_headers_named_secret_are_masked_too():
    assert masked({"X-Token": "t", "X-Team": "data"}, also={"x-token"}) == {"X-Token": MASK, "X-Team": "data"}
    assert masked(None) == {}
