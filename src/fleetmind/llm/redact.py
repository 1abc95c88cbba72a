"""Keep secrets out of logs, recordings and error messages."""

from __future__ import annotations

import re
from collections.abc import Iterable

_BEARER = re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._\-~+/=]+")
_AUTH_HEADER = re.compile(r"(?i)(authorization['\"]?\s*[:=]\s*['\"]?)[^'\"\s,}]+(\s+[^'\"\s,}]+)?")
_SK_KEY = re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}")

MASK = "***"


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """Remove secrets from a piece of text.

    Masks every given secret verbatim, any ``Bearer <token>``, any ``Authorization: <value>``
    and anything shaped like an OpenAI key (``sk-...``).

    Args:
        text: the text to clean.
        secrets: exact strings to mask (empty and ``None`` entries are skipped).

    Returns:
        The text with secrets replaced by ``***``.
    """
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)
    text = _BEARER.sub(lambda m: m.group(1) + MASK, text)
    text = _AUTH_HEADER.sub(lambda m: m.group(1) + MASK, text)
    return _SK_KEY.sub(MASK, text)
