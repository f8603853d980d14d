"""The signatures: ours on a signed webhook, and the ones 钉钉 and 飞书 robots check in their signed-secret mode.

Each is a small pure function, stated once here and checked by the tests against the formats the vendors publish.
"""

import base64
import hashlib
import hmac
from urllib.parse import quote_plus

SIGNATURE_HEADER = "X-GPUCloud-Signature"
TIMESTAMP_HEADER = "X-GPUCloud-Timestamp"


def webhook_signature(secret: str, timestamp: int, body: bytes) -> str:
    """``sha256=<hex>``: HMAC-SHA256 keyed with the channel's secret over ``"<timestamp>.<raw body>"`` (the scheme
    Stripe uses, so a receiver can reject a replayed body by its old timestamp)."""
    message = str(timestamp).encode() + b"." + body
    return "sha256=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def dingtalk_sign(secret: str, timestamp_ms: int) -> str:
    """钉钉 custom robot, 加签: base64(HMAC-SHA256(key=secret, msg="<timestamp ms>\\n<secret>")), URL-encoded."""
    digest = hmac.new(secret.encode(), f"{timestamp_ms}\n{secret}".encode(), hashlib.sha256).digest()
    return quote_plus(base64.b64encode(digest).decode())


def feishu_sign(secret: str, timestamp: int) -> str:
    """飞书 custom bot, 签名校验: base64(HMAC-SHA256(key="<timestamp s>\\n<secret>", msg=b""))."""
    digest = hmac.new(f"{timestamp}\n{secret}".encode(), b"", hashlib.sha256).digest()
    return base64.b64encode(digest).decode()
