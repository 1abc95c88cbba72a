from __future__ import annotations

import math

import pytest

from fleetmind.llm.reward import LLMReward, parse_score
from fleetmind.testing.fake_server import FakeChatServer, Reply


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"score": 1}', 1.0),
        ("-1", -1.0),
        ("Score: 0.5 because", 0.5),
        ("nan", None),
        ("", None),
        ("no idea", None),
        ('{"score": "high"}', None),
        ("1e999", None),
    ],
)
def test_parse_score(text: str, value: float | None) -> None:
    assert parse_score(text) == value


def test_samples_averaged_and_clamped() -> None:
    with FakeChatServer(['{"score": 1}', '{"score": 1}', "7"]) as srv:
        r = LLMReward(srv.client(), goal="deliver", variance_threshold=1.0)
        v = r("robot at shelf")
    assert v == pytest.approx(1.0)  # 7 clamped to 1
    assert len(srv.requests) == 3
    body = srv.requests[0].body
    assert 0.0 < body["temperature"] <= 0.7  # samples can differ (see llm/reward.py)
    assert body["max_tokens"] <= 12
    assert "0 = no change" in srv.requests[0].messages[0]["content"]


def test_parse_failure_falls_back_to_previous_never_nan() -> None:
    with FakeChatServer(["1", "1", "1", "??", "??", "??"]) as srv:
        r = LLMReward(srv.client(), goal="g")
        assert r("s1") == 1.0
        v = r("s2")
    assert v == 1.0
    assert not math.isnan(v)
    assert r.stats()["llm/reward/fallbacks"] == 1
    assert r.stats()["llm/reward/parse_failures"] == 1


def test_high_variance_falls_back() -> None:
    with FakeChatServer(["0", "0", "0", "1", "-1", "1"]) as srv:
        r = LLMReward(srv.client(), goal="g", variance_threshold=0.25)
        assert r("a") == 0.0
        assert r("b") == 0.0
    st = r.stats()
    assert st["llm/reward/high_variance"] == 1
    assert st["llm/reward/fallback_rate"] == 0.5
    assert st["llm/reward/variance_per_state"]["b"] == pytest.approx(8 / 9)
    assert st["llm/reward/variance_max"] == pytest.approx(8 / 9)


def test_cache_and_rate_limit() -> None:
    with FakeChatServer(["1"]) as srv:
        r = LLMReward(srv.client(), goal="g", every_k_steps=5)
        assert r("same", step=0) == 1.0
        assert r("same", step=1) == 1.0  # cache
        assert r("other", step=2) == 1.0  # rate-limited: previous value, no call
        assert len(srv.requests) == 3
        r("other", step=5)
        assert len(srv.requests) == 6
    st = r.stats()
    assert st["llm/reward/cache_hits"] == 1
    assert st["llm/reward/rate_limited"] == 1


def test_server_errors_fall_back() -> None:
    with FakeChatServer([Reply(status=500)]) as srv:
        r = LLMReward(srv.client(max_retries=0), goal="g", initial=0.25)
        assert r("s") == 0.25


def test_any_disagreement_among_the_samples_trips_the_guard_by_default() -> None:
    with FakeChatServer(["1", "1", "1", "0", "0", "1"]) as srv:
        r = LLMReward(srv.client(), goal="g")
        assert r("a") == 1.0
        assert r("b") == 1.0  # [0, 0, 1]: the previous value, not 1/3
    assert r.stats()["llm/reward/high_variance"] == 1
