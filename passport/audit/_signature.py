"""A passport's content hash signed with ed25519 at the end of its run, and the check of it.

The key: `PASSPORT_SIGNING_KEY` (base64 of a raw 32-byte ed25519 private key: a team's key, kept
in the team's secret store), else this machine's own key, made on first use in
`$PASSPORT_KEY_DIR` (default `~/.config/passport`) as `signing-key.ed25519`, readable by its
owner only. The passport carries the public key, its fingerprint and the signature over its
`content_sha256`.

What it proves, and what not: a valid signature says the holder of that private key sealed
this content; anyone can sign a forgery with a key of their own, so the check that matters is
`passport verify --key FINGERPRINT` (or `gate --key`): the passport must be signed by a key you
trust. It says nothing about whether the raw files are what the server sent; it does say they
are what the key's holder's run wrote. `cryptography` (a base dependency) is imported only when a
passport is signed or checked.
"""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path
from typing import Any

from passport._errors import SigningKeyError

__all__ = ["KEY_ENV", "KEY_DIR_ENV", "sign_content", "signature_problem", "key_fingerprint", "local_key_path",
           "check_signing_key", "signing_fingerprint"]

KEY_ENV = "PASSPORT_SIGNING_KEY"
KEY_DIR_ENV = "PASSPORT_KEY_DIR"
_ALGORITHM = "ed25519"


def local_key_path() -> Path:
    return Path(os.environ.get(KEY_DIR_ENV) or Path.home() / ".config" / "passport") / "signing-key.ed25519"


def key_fingerprint(public_raw: bytes) -> str:
    """`sha256:` and the first 32 hex digits of the raw public key's sha256."""
    return "sha256:" + hashlib.sha256(public_raw).hexdigest()[:32]


def _decoded(text: bytes | str, where: str, fix: str) -> Any:
    """The ed25519 private key whose raw 32 bytes `text` holds in base64, or SigningKeyError."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        return Ed25519PrivateKey.from_private_bytes(base64.b64decode(text, validate=True))
    except ValueError as exc:  # binascii.Error is a ValueError
        raise SigningKeyError(f"{where} is not the base64 of a 32-byte ed25519 private key ({exc}); {fix}") from None


def _private_key() -> tuple[Any, str, bool]:
    """(the signing key, where it came from: environment or local, whether it was made now);
    SigningKeyError when neither the environment's key nor this machine's key file can be read or
    made."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    team = os.environ.get(KEY_ENV)
    if team:
        return _decoded(team.strip(), KEY_ENV, "export the team's key as it is stored (e.g. `base64 -w0` of the raw "
                                               "key), or unset it to sign with this machine's own key"), \
            "environment", False
    path = local_key_path()
    fix = (f"set {KEY_DIR_ENV} to a folder this user can write, or export {KEY_ENV} (a team's key), and run again")
    made = False
    try:
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            raw = Ed25519PrivateKey.generate().private_bytes_raw()
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "wb") as file:
                    file.write(base64.b64encode(raw) + b"\n")
                made = True
            except FileExistsError:
                pass  # another run made it first: use theirs
        stored = path.read_bytes().strip()
    except OSError as exc:
        raise SigningKeyError(f"this machine's signing key {path} cannot be read or made "
                              f"({exc.strerror or exc}); {fix}") from None
    return _decoded(stored, f"the signing key file {path}",
                    f"move the file away (a new key is made; passports it signed keep its fingerprint) or {fix}"), \
        "local", made


def check_signing_key() -> str:
    """Which key this run's passport will be signed with, as a sentence (the key made now if it is
    this machine's first run); SigningKeyError when there is none: a run checks this before it
    sends anything."""
    key, source, made = _private_key()
    fingerprint = _fingerprint_of(key)
    if source == "environment":
        return f"signing with {KEY_ENV} ({fingerprint})"
    if made:
        return (f"signing with this machine's new key {fingerprint}, made now at {local_key_path()} (readable by "
                f"you only); `passport verify --key {fingerprint}` accepts only passports it signed")
    return f"signing with this machine's key {fingerprint} ({local_key_path()})"


def _fingerprint_of(key: Any) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return key_fingerprint(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))


def signing_fingerprint() -> str:
    """The fingerprint of the key this process signs with (PASSPORT_SIGNING_KEY, else this
    machine's key, made now if there is none); SigningKeyError when there is none."""
    return _fingerprint_of(_private_key()[0])


def sign_content(content_sha256: str) -> dict[str, str]:
    """The passport's `signature` section for its content hash."""
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    key, source, _ = _private_key()
    public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return {"algorithm": _ALGORITHM, "public_key": base64.b64encode(public).decode(),
            "fingerprint": key_fingerprint(public), "key": source,
            "value": base64.b64encode(key.sign(content_sha256.encode())).decode()}


def signature_problem(passport: dict[str, Any], trusted: tuple[str, ...] = ()) -> str | None:
    """What is wrong with a passport's signature, or None: absent when `trusted` keys are asked
    for, not a valid ed25519 signature of its content hash by the key it names, or by a key
    that is not among `trusted` (fingerprints)."""
    signature = passport.get("signature")
    if not signature:
        return f"it is not signed, and a key was required ({', '.join(trusted)})" if trusted else None
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        public = base64.b64decode(signature["public_key"], validate=True)
        Ed25519PublicKey.from_public_bytes(public).verify(base64.b64decode(signature["value"], validate=True),
                                                          str(passport.get("content_sha256")).encode())
    except (InvalidSignature, ValueError, KeyError, TypeError):
        return "its signature is not a valid signature of its content hash by the key it names"
    if key_fingerprint(public) != signature.get("fingerprint"):
        return "its signature names a fingerprint that is not its public key's"
    if trusted and signature["fingerprint"] not in trusted:
        return f"it is signed by key {signature['fingerprint']}, not by {', '.join(trusted)}"
    return None
