"""Secrets masked whole, cut, or inside a base64 encoding (issue 22); ordinary text untouched."""

from __future__ import annotations

import base64

import pytest

from harness import has_secret, register_secret, scrub, scrub_bytes

KEY = "sk-unit-9d41b7c2e0aa55f3"


@pytest.fixture(autouse=True, scope="module")
def _registered() -> None:
    register_secret(KEY)


@pytest.mark.parametrize("pad", [0, 1, 2])
def test_a_key_inside_a_base64_blob_is_masked_at_every_alignment(pad: int) -> None:
    blob = base64.b64encode(b"x" * pad + f"token={KEY};".encode()).decode()
    assert scrub(f"header was {blob} end") == "header was *** end"
    assert scrub(f"url-safe {blob.replace('+', '-').replace('/', '_')} end") == "url-safe *** end"


def test_a_cut_of_the_key_is_masked_and_ordinary_text_is_not() -> None:
    assert scrub(f"got ...{KEY[4:18]}...") == "got ...***..."
    assert scrub_bytes(f"got {KEY[2:-2]}".encode()) == b"got ***"
    plain = "a long_identifier_without_secrets and 1234567890123456789 digits, sk-unit-other"
    assert scrub(plain) == plain


def test_a_cut_of_the_key_inside_a_megabyte_run_is_found_and_masked() -> None:
    """A long answer is one run of a megabyte: its check searches the secret's slices in it (the
    slice-by-slice lookup took 35 s a megabyte with a key registered)."""
    plain = b"x" * (1 << 20)
    assert not has_secret(plain)
    leaked = plain + KEY[3:17].encode() + plain
    assert has_secret(leaked)
    assert scrub_bytes(leaked) == b"***"  # the run that holds it is masked whole


@pytest.mark.parametrize("padding", [0, 5000])  # a short text is searched in one call, a long one word by word
def test_credentials_by_their_form_are_masked_in_short_and_long_texts(padding: int) -> None:
    pad = "word " * (padding // 5)
    for leak, masked in (("Authorization: Bearer abc.def", "Authorization: ***"),
                         ("fetch https://user:pw@host/x", "fetch https://***@host/x"),
                         ("x-api-key=zzz", "x-api-key=***")):
        text = f"{pad}{leak} end"
        assert has_secret(text.encode()), leak
        assert scrub(text) == f"{pad}{masked} end", leak
    assert not has_secret((pad + "nothing here").encode()) and scrub(pad + "plain") == pad + "plain"
