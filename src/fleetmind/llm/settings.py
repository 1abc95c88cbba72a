"""Where the LLM lives: settings resolved from flags, then environment variables.

Resolution order for each field: the explicit argument (a command-line flag), then
``FLEETMIND_LLM_BASE_URL`` / ``FLEETMIND_LLM_MODEL`` / ``FLEETMIND_LLM_API_KEY``, then
``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``. With no base URL anywhere, the embedded model is meant.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args

from fleetmind.errors import ConfigError

SchemaMode = Literal["auto", "json_object_schema", "json_schema", "none"]
"""How a JSON schema is sent to a server.

``json_object_schema``: ``response_format={"type": "json_object", "schema": S}`` (llama.cpp
server; it rejects ``json_schema``). ``json_schema``: OpenAI's
``{"type": "json_schema", "json_schema": {"name": ..., "schema": S, "strict": true}}`` (OpenAI,
vLLM, Ollama). ``none``: never send a schema; callers fall back to parse, repair and re-ask.
``auto`` (the default for a served model): ``json_schema`` first; a server that refuses it
with HTTP 400 or 422 is asked again with ``json_object_schema``, then with no schema, and the
first mode it accepts is kept for the client's later calls.
"""
AUTO_ORDER: tuple[SchemaMode, ...] = ("json_schema", "json_object_schema", "none")
"""The modes ``auto`` tries, in order."""

DEFAULT_EMBEDDED_MODEL = "smollm2-135m-instruct"


@dataclass(frozen=True)
class LLMSettings:
    """Resolved LLM connection settings.

    Attributes:
        base_url: the OpenAI-compatible base URL (ending in ``/v1``), or None for the embedded
            model.
        model: the model name to request.
        api_key: the bearer token, or None. Never shown by ``repr``.
        schema_mode: how JSON schemas are sent (see :data:`SchemaMode`).
        timeout_s: default per-call time limit.
        max_retries: retries on connection errors, 429 and 5xx.
    """

    base_url: str | None = None
    model: str = DEFAULT_EMBEDDED_MODEL
    api_key: str | None = field(default=None, repr=False)
    schema_mode: SchemaMode = "auto"
    timeout_s: float = 60.0
    max_retries: int = 3

    @property
    def embedded(self) -> bool:
        """True when no server URL is configured and the embedded model is meant."""
        return self.base_url is None

    @classmethod
    def from_env(
        cls,
        *,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        schema_mode: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> LLMSettings:
        """Resolve settings: arguments > ``FLEETMIND_LLM_*`` > ``OPENAI_*``.

        Args:
            base_url: flag value for the base URL.
            model: flag value for the model name.
            api_key: flag value for the API key.
            schema_mode: flag value for the schema mode (``FLEETMIND_LLM_SCHEMA_MODE``).
            env: the environment to read (defaults to ``os.environ``).

        Returns:
            The resolved settings.

        Raises:
            ConfigError: a value is malformed (names the variable at fault).
        """
        env = os.environ if env is None else env

        def pick(flag: str | None, *names: str) -> tuple[str | None, str]:
            if flag:
                return flag, "flag"
            for name in names:
                value = env.get(name)
                if value:
                    return value, name
            return None, ""

        url, url_src = pick(base_url, "FLEETMIND_LLM_BASE_URL", "OPENAI_BASE_URL")
        if url is not None:
            if not url.startswith(("http://", "https://")):
                raise ConfigError(f"{url_src or 'base_url'}: expected an http(s) URL, got {url!r}")
            url = url.rstrip("/")
        name, _ = pick(model, "FLEETMIND_LLM_MODEL")
        key, _ = pick(api_key, "FLEETMIND_LLM_API_KEY", "OPENAI_API_KEY")
        mode, mode_src = pick(schema_mode, "FLEETMIND_LLM_SCHEMA_MODE")
        if mode is None:
            mode = "auto"
        if mode not in get_args(SchemaMode):
            raise ConfigError(
                f"{mode_src or 'schema_mode'}: expected one of {get_args(SchemaMode)}, got {mode!r}"
            )
        return cls(
            base_url=url,
            model=name or DEFAULT_EMBEDDED_MODEL,
            api_key=key,
            schema_mode=mode,  # type: ignore[arg-type]  # checked against SchemaMode above
        )
