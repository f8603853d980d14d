"""Secrets shown once and stored hashed, found again by a visible prefix: API tokens (``gpc_…``) and inference
endpoint keys (``sk-…``). The plaintext is ``<prefix><separator><random>``; the database keeps the prefix (to find
the row and to show the user which one it is) and the SHA-256 of the whole plaintext (compared in constant time).
"""

import hashlib
import hmac
import secrets
from collections.abc import Callable

from django.db import IntegrityError, transaction

ATTEMPTS = 5


def hash_secret(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode()).hexdigest()


def matches(stored_hash: str, plaintext: str) -> bool:
    return hmac.compare_digest(stored_hash, hash_secret(plaintext))


def issue(create: Callable[[str, str], object], *, prefix: str, hex_bytes: int, separator: str):
    """Draw a fresh prefix and secret and ``create(prefix, hash)`` the row; a prefix collision (the unique
    constraint) draws again. Returns (row, plaintext), or None after ``ATTEMPTS`` collisions."""
    for _attempt in range(ATTEMPTS):
        visible = prefix + secrets.token_hex(hex_bytes)
        plaintext = f"{visible}{separator}{secrets.token_urlsafe(32)}"
        try:
            with transaction.atomic():
                row = create(visible, hash_secret(plaintext))
        except IntegrityError:
            continue
        return row, plaintext
    return None
