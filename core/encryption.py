"""Values the console must read back in plaintext (users' secrets), encrypted at rest with Fernet (AES-128-CBC with
an HMAC-SHA256 tag, so a changed ciphertext is refused rather than decrypted into garbage).

The key is derived from ``SECRET_KEY`` with HKDF, so there is no second key to deploy or lose, and a database dump
alone reveals no value. Keys derived from ``SECRET_KEY_FALLBACKS`` still decrypt: rotating ``SECRET_KEY`` the
Django way (the old key kept as a fallback for a while) loses nothing, and a value saved again is encrypted under
the new key.

Part of the shared kernel: nothing here imports an app.
"""

import base64
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.views.decorators.debug import sensitive_variables

# Binds the derived key to this use: another feature deriving a key from SECRET_KEY gets an unrelated one.
PURPOSE = b"gpucloud console: encrypted values at rest, v1"


class DecryptionError(Exception):
    """The ciphertext was not made with the current key or a fallback (or was changed since)."""


def _derive(secret_key: str) -> Fernet:
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=PURPOSE).derive(secret_key.encode())
    return Fernet(base64.urlsafe_b64encode(key))


@lru_cache(maxsize=4)
def _fernet_for(secret_keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([_derive(key) for key in secret_keys])


def _fernet() -> MultiFernet:
    # Looked up on every call, so tests and a reloaded configuration that change SECRET_KEY use the new key.
    return _fernet_for((settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", ())))


# Django's error reports (the debug page, error e-mails) list a failing frame's variables: plaintext shows as stars.
@sensitive_variables("plaintext")
def encrypt(plaintext: str) -> str:
    """``plaintext`` encrypted under the current key, as ASCII text for a database column."""
    return _fernet().encrypt(plaintext.encode()).decode("ascii")


def decrypt(ciphertext: str) -> str:
    """The plaintext of what :func:`encrypt` returned, under the current key or a fallback."""
    try:
        return _fernet().decrypt(ciphertext.encode("ascii")).decode()
    except (InvalidToken, UnicodeError) as exc:
        raise DecryptionError("the value cannot be decrypted with SECRET_KEY or its fallbacks") from exc
