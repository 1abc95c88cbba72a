from __future__ import annotations

import logging
import time

import pytest

from fleetmind.errors import ConfigError
from fleetmind.llm.chat import Message
from fleetmind.llm.client import OpenAICompatClient
from fleetmind.llm.embedded import free_port
from fleetmind.llm.errors import LLMConnectionError, LLMHTTPError, LLMTimeoutError
from fleetmind.llm.settings import LLMSettings
from fleetmind.testing.fake_server import FakeChatServer, Received, Reply

MSGS = [Message.user("hello")]
KEY = "sk-test-SECRET0123456789abcdef"


def test_ok_reply_usage_and_latency() -> None:
    with FakeChatServer([Reply("hi there", prompt_tokens=7, completion_tokens=2)]) as srv:
        r = srv.client().chat(MSGS, max_tokens=5, temperature=0.0)
    assert r.text == "hi there"
    assert r.usage.prompt_tokens == 7
    assert r.usage.completion_tokens == 2
    assert r.latency_s > 0
    body = srv.requests[0].body
    assert body["max_tokens"] == 5
    assert body["temperature"] == 0.0
    assert body["messages"] == [{"role": "user", "content": "hello"}]


@pytest.mark.parametrize(
    "bad",
    [Reply(status=500), Reply(status=429, headers={"Retry-After": "0"}), Reply(reset=True)],
    ids=["500", "429", "reset"],
)
def test_retries_then_succeeds(bad: Reply) -> None:
    with FakeChatServer([bad, bad, Reply("ok")]) as srv:
        r = srv.client(max_retries=3).chat(MSGS)
    assert r.text == "ok"
    assert len(srv.requests) == 3


def test_retries_exhausted_raises_http_error() -> None:
    with FakeChatServer([Reply(status=503)]) as srv, pytest.raises(LLMHTTPError) as info:
        srv.client(max_retries=2).chat(MSGS)
    assert info.value.status_code == 503
    assert len(srv.requests) == 3


def test_4xx_is_not_retried_and_is_clear() -> None:
    bad = Reply(status=400, body='{"error": {"message": "bad field foo"}}')
    with FakeChatServer([bad]) as srv, pytest.raises(LLMHTTPError) as info:
        srv.client(max_retries=3).chat(MSGS)
    assert len(srv.requests) == 1
    assert "400" in str(info.value)
    assert "bad field foo" in str(info.value)


def test_connection_refused_is_connection_error() -> None:
    client = OpenAICompatClient(
        f"http://127.0.0.1:{free_port()}/v1", "m", max_retries=1, backoff_s=0.01
    )
    with pytest.raises(LLMConnectionError):
        client.chat(MSGS, timeout_s=2)


def test_slow_reply_times_out_within_limit() -> None:
    with FakeChatServer([Reply("late", delay_s=2.0)]) as srv:
        t0 = time.monotonic()
        with pytest.raises(LLMTimeoutError):
            srv.client().chat(MSGS, timeout_s=0.3)
        assert time.monotonic() - t0 < 1.5


def test_garbage_body_is_connection_error() -> None:
    with (
        FakeChatServer([Reply(body="<html>oops</html>")]) as srv,
        pytest.raises(LLMConnectionError, match="not a chat completion"),
    ):
        srv.client().chat(MSGS)


def test_null_content_is_empty_text() -> None:
    with FakeChatServer([Reply(None)]) as srv:
        assert srv.client().chat(MSGS).text == ""


def test_schema_modes() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    with FakeChatServer(["{}"]) as srv:
        srv.client(schema_mode="json_object_schema").chat(MSGS, json_schema=schema)
        srv.client(schema_mode="json_schema").chat(MSGS, json_schema=schema)
        srv.client(schema_mode="none").chat(MSGS, json_schema=schema)
    f0, f1 = srv.requests[0].body["response_format"], srv.requests[1].body["response_format"]
    assert f0 == {"type": "json_object", "schema": schema}
    assert f1["type"] == "json_schema"
    assert f1["json_schema"]["schema"] == schema
    assert "response_format" not in srv.requests[2].body


def test_auto_schema_mode_keeps_the_first_the_server_accepts() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}

    def llama_cpp_like(req: Received) -> Reply:
        # llama-cpp-python's server: 422 for any response_format type but json_object.
        fmt = req.body.get("response_format")
        if fmt is not None and fmt["type"] != "json_object":
            return Reply(status=422, body='{"detail": "response_format.type"}')
        return Reply('{"a": 1}')

    with FakeChatServer(llama_cpp_like) as srv:
        client = srv.client(schema_mode="auto")
        assert client.schema_mode == "auto"
        assert client.chat(MSGS, json_schema=schema).text == '{"a": 1}'
        assert client.schema_mode == "json_object_schema"
        client.chat(MSGS, json_schema=schema)
        types = [r.body["response_format"]["type"] for r in srv.requests]
    # Tried json_schema once, then kept json_object for every later call.
    assert types == ["json_schema", "json_object", "json_object"]


def test_auto_schema_mode_does_not_hide_other_errors() -> None:
    with FakeChatServer([Reply(status=401, body='{"error": "no"}')]) as srv:
        client = srv.client(schema_mode="auto")
        with pytest.raises(LLMConnectionError, match="401"):
            client.chat(MSGS, json_schema={"type": "object"})
        assert client.schema_mode == "auto"
        assert len(srv.requests) == 1


def test_api_key_sent_but_never_leaked(caplog: pytest.LogCaptureFixture) -> None:
    def echo(req: Received) -> Reply:
        # A hostile server echoing the Authorization header into its error message.
        return Reply(status=401, body=f'{{"error": "bad key {req.headers["authorization"]}"}}')

    caplog.set_level(logging.DEBUG)
    with FakeChatServer(echo) as srv:
        client = srv.client(api_key=KEY)
        with pytest.raises(LLMHTTPError) as info:
            client.chat(MSGS)
    assert srv.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in str(info.value)
    assert "SECRET" not in str(info.value)
    assert KEY not in repr(client)
    assert KEY not in caplog.text


def test_api_key_not_in_retry_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with FakeChatServer([Reply(status=500, body=f'{{"error": "{KEY}"}}'), Reply("ok")]) as srv:
        srv.client(api_key=KEY).chat(MSGS)
    assert "llm retry" in caplog.text
    assert KEY not in caplog.text


def test_settings_resolution_order() -> None:
    env = {
        "FLEETMIND_LLM_BASE_URL": "http://fm:1/v1",
        "OPENAI_BASE_URL": "http://oa:2/v1",
        "OPENAI_API_KEY": "sk-openai-key-123456",
        "FLEETMIND_LLM_MODEL": "m1",
    }
    s = LLMSettings.from_env(env=env)
    assert s.base_url == "http://fm:1/v1"
    assert s.api_key == "sk-openai-key-123456"
    assert s.model == "m1"
    assert "sk-openai" not in repr(s)
    s = LLMSettings.from_env(base_url="http://flag:3/v1/", api_key="k", env=env)
    assert s.base_url == "http://flag:3/v1"
    assert s.api_key == "k"
    s = LLMSettings.from_env(env={"OPENAI_BASE_URL": "http://oa:2/v1"})
    assert s.base_url == "http://oa:2/v1"
    assert LLMSettings.from_env(env={}).embedded


def test_settings_bad_values_name_the_source() -> None:
    with pytest.raises(ConfigError, match="FLEETMIND_LLM_BASE_URL"):
        LLMSettings.from_env(env={"FLEETMIND_LLM_BASE_URL": "localhost:8000"})
    with pytest.raises(ConfigError, match="FLEETMIND_LLM_SCHEMA_MODE"):
        LLMSettings.from_env(env={"FLEETMIND_LLM_SCHEMA_MODE": "xml"})


def test_from_settings_without_url_is_clear() -> None:
    with pytest.raises(LLMConnectionError, match="FLEETMIND_LLM_BASE_URL"):
        OpenAICompatClient.from_settings(LLMSettings())
