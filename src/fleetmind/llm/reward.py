"""An LLM as a reward function over a text description of the state (§4.3, §5.4).

Defences against drift and scorer-pleasing: temperature 0, a few tokens, discrete levels with
anchors in the prompt, ``samples`` answers averaged, the result clamped to [-1, 1] and never NaN.
It falls back to the previous value when parsing fails, the call fails, or the samples disagree
(variance above ``variance_threshold``). Scores are cached by state text, and the model is called
at most once per ``every_k_steps`` steps. :meth:`LLMReward.stats` reports drift statistics.

For slow, describable judgements only (is this placement sensible, every few seconds); never a
control-loop reward.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from fleetmind.llm.chat import CallContext, ChatClient, Message, report_outcome
from fleetmind.llm.errors import BudgetExceeded, LLMConnectionError
from fleetmind.llm.parse import parse_json

log = logging.getLogger(__name__)

DEFAULT_LEVELS: Mapping[int, str] = {
    -1: "the state is clearly further from the goal",
    0: "no change, or unclear",
    1: "the state is clearly closer to the goal",
}

_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)")


def parse_score(text: str) -> float | None:
    """Read a score from a reply: ``{"score": x}`` or the first number in the text.

    Args:
        text: the model reply.

    Returns:
        A finite float, or None when no finite number is found.
    """
    value: Any = None
    try:
        parsed, _ = parse_json(text, max_chars=500)
        if isinstance(parsed, dict):
            value = parsed.get("score")
        elif isinstance(parsed, int | float) and not isinstance(parsed, bool):
            value = parsed
    except Exception:  # fall through to the regex on any parse trouble
        value = None
    if value is None or isinstance(value, bool):
        match = _NUMBER.search(text or "")
        if match is None:
            return None
        value = match.group(0)
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


class LLMReward:
    """A reward function backed by a chat model.

    Args:
        client: the backend.
        goal: what "better" means, in words.
        levels: the discrete levels and their anchors (default -1/0/1).
        samples: answers averaged per evaluation (default 3).
        variance_threshold: sample variance above which the previous value is used.
        every_k_steps: at most one model evaluation per this many steps.
        max_tokens: cap per answer.
        use_schema: constrain answers to ``{"score": <level>}`` where the backend can.
        initial: the value returned before any good evaluation.
        context: caller context for recording and accounting.
    """

    def __init__(
        self,
        client: ChatClient,
        *,
        goal: str,
        levels: Mapping[int, str] | None = None,
        samples: int = 3,
        variance_threshold: float = 0.25,
        every_k_steps: int = 1,
        max_tokens: int = 12,
        use_schema: bool = True,
        initial: float = 0.0,
        context: CallContext | None = None,
    ) -> None:
        if samples < 1:
            raise ValueError(f"samples must be >= 1, got {samples}")
        self.client = client
        self.goal = goal
        self.levels = dict(levels or DEFAULT_LEVELS)
        self.samples = samples
        self.variance_threshold = variance_threshold
        self.every_k_steps = max(1, every_k_steps)
        self.max_tokens = max_tokens
        self.use_schema = use_schema
        self.context = context or CallContext(decision_type="reward")
        self.previous = _clamp(initial)
        self._cache: dict[str, float] = {}
        self._last_step: int | None = None
        self._variances: dict[str, float] = {}
        self.evaluations = 0
        self.model_calls = 0
        self.cache_hits = 0
        self.rate_limited = 0
        self.fallbacks = 0
        self.parse_failures = 0
        self.high_variance = 0

    def prompt(self, state_text: str) -> list[Message]:
        """The messages sent for a state."""
        anchors = "\n".join(f"{lvl} = {desc}" for lvl, desc in sorted(self.levels.items()))
        system = (
            "You are a strict scorer. Judge the state against the goal and answer with one "
            f'JSON object {{"score": N}} where N is one of {sorted(self.levels)}.\n'
            f"Anchors:\n{anchors}"
        )
        return [Message.system(system), Message.user(f"Goal: {self.goal}\nState:\n{state_text}")]

    def schema(self) -> dict[str, Any]:
        """The JSON schema of an answer."""
        return {
            "type": "object",
            "properties": {"score": {"enum": sorted(self.levels)}},
            "required": ["score"],
        }

    def __call__(self, state_text: str, *, step: int | None = None) -> float:
        """Score a state; see :meth:`score`."""
        return self.score(state_text, step=step)

    def score(self, state_text: str, *, step: int | None = None) -> float:
        """Score a state in [-1, 1] (never NaN).

        Args:
            state_text: the state described in words.
            step: the caller's step counter, for the call-rate limit.

        Returns:
            The cached, fresh or previous value.
        """
        if state_text in self._cache:
            self.cache_hits += 1
            self.previous = self._cache[state_text]
            return self.previous
        if (
            step is not None
            and self._last_step is not None
            and step - self._last_step < self.every_k_steps
        ):
            self.rate_limited += 1
            return self.previous
        self._last_step = step
        self.evaluations += 1
        values = self._sample(state_text)
        need = math.ceil(self.samples / 2)
        if len(values) < need:
            self.parse_failures += 1
            return self._fallback("too few parsable samples")
        arr = np.clip(np.asarray(values, dtype=float), -1.0, 1.0)
        variance = float(arr.var())
        self._variances[state_text] = variance
        if variance > self.variance_threshold:
            self.high_variance += 1
            return self._fallback(f"sample variance {variance:.3f}")
        value = _clamp(float(arr.mean()))
        self._cache[state_text] = value
        self.previous = value
        return value

    def _sample(self, state_text: str) -> list[float]:
        messages = self.prompt(state_text)
        schema = self.schema() if self.use_schema else None
        values: list[float] = []
        for _ in range(self.samples):
            try:
                result = self.client.chat(
                    messages,
                    temperature=0.0,
                    max_tokens=self.max_tokens,
                    json_schema=schema,
                    context=self.context,
                )
            except (LLMConnectionError, BudgetExceeded) as exc:
                log.info("llm reward: call failed: %s", exc)
                continue
            finally:
                self.model_calls += 1
            number = parse_score(result.text)
            report_outcome(result, number, None if number is not None else "no number")
            if number is not None:
                values.append(number)
        return values

    def _fallback(self, why: str) -> float:
        self.fallbacks += 1
        log.info("llm reward: fallback to previous value %.3f (%s)", self.previous, why)
        return self.previous

    def stats(self) -> dict[str, Any]:
        """Drift statistics (metric keys under ``llm/reward/``).

        Returns:
            Evaluations, model calls, cache hits, rate-limited steps, fallbacks and their rate,
            parse failures, high-variance evaluations, and the per-state sample variance (mean,
            max, and per state text).
        """
        variances = list(self._variances.values())
        return {
            "llm/reward/evaluations": self.evaluations,
            "llm/reward/model_calls": self.model_calls,
            "llm/reward/cache_hits": self.cache_hits,
            "llm/reward/rate_limited": self.rate_limited,
            "llm/reward/fallbacks": self.fallbacks,
            "llm/reward/fallback_rate": self.fallbacks / self.evaluations
            if self.evaluations
            else 0.0,
            "llm/reward/parse_failures": self.parse_failures,
            "llm/reward/high_variance": self.high_variance,
            "llm/reward/variance_mean": float(np.mean(variances)) if variances else 0.0,
            "llm/reward/variance_max": float(np.max(variances)) if variances else 0.0,
            "llm/reward/variance_per_state": dict(self._variances),
        }


def _clamp(value: float) -> float:
    if not math.isfinite(value):
        return 0.0
    return min(1.0, max(-1.0, value))
