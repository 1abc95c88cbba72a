"""An LLM as a reward function over a text description of a transition (§4.3, §5.4).

The text gives the state before and the state after a stretch of time (the RL tier writes it:
``fleetmind.rl.reward.transition``), and the anchors score the change: closer to the goal,
further, or no change. A score of one state alone cannot tell "closer" from "further".

Defences against drift and scorer-pleasing: a few tokens, discrete levels with anchors in the
prompt, ``samples`` answers averaged, the result clamped to [-1, 1] and never NaN. It falls back
to the previous value when parsing fails, the call fails, or the samples disagree (variance above
``variance_threshold``: by default any disagreement). Scores are cached by state text, and the
model is called at most once per ``every_k_steps`` steps. :meth:`LLMReward.stats` reports drift
statistics.

Samples are drawn at a small temperature (default 0.5), not at 0: FIELD-NOTES §4.3 asks for
temperature 0 and still sees scores differ by up to 0.3 on hosted models, but a local llama.cpp
model at temperature 0 answers the same prompt identically every time, so three samples would be
one sample paid three times and the variance guard could never fire. With a temperature the
samples can differ, their mean is a steadier score, and a state the model is unsure about is
refused (previous value) instead of scored at random. The server's sampling generator is seeded
(``EmbeddedServer(seed=...)``), so a run repeats; a replay serves the recorded samples in order.

For slow, describable judgements only (is this placement sensible, every few seconds); never a
control-loop reward.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from fleetmind.errors import range_message
from fleetmind.llm.chat import CallContext, ChatClient, Message, report_outcome
from fleetmind.llm.errors import BudgetExceeded, LLMConnectionError
from fleetmind.llm.parse import parse_json
from fleetmind.llm.record import CallRecorder
from fleetmind.llm.settings import LLMSettings

log = logging.getLogger(__name__)

DEFAULT_LEVELS: Mapping[int, str] = {
    -1: "the state after is clearly further from the goal than the state before",
    0: "no change, or unclear",
    1: "the state after is clearly closer to the goal than the state before",
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
        variance_threshold: sample variance above which the previous value is used (default
            0: any disagreement among the samples; over the levels -1/0/1 the old 0.25 let
            ``[0, 0, 1]``, variance 2/9, pass as a score of 1/3).
        every_k_steps: at most one model evaluation per this many steps.
        max_tokens: cap per answer.
        use_schema: constrain answers to ``{"score": <level>}`` where the backend can.
        initial: the value returned before any good evaluation.
        context: caller context for recording and accounting.
        temperature: sampling temperature of every sample (see the module docstring; 0 makes
            the samples of a local model identical).
        cache: a state text -> score store to share between scorers (e.g. the runs of one
            experiment); default a fresh dict.
    """

    def __init__(
        self,
        client: ChatClient,
        *,
        goal: str,
        levels: Mapping[int, str] | None = None,
        samples: int = 3,
        variance_threshold: float = 0.0,
        every_k_steps: int = 1,
        max_tokens: int = 12,
        use_schema: bool = True,
        initial: float = 0.0,
        context: CallContext | None = None,
        temperature: float = 0.5,
        cache: MutableMapping[str, float] | None = None,
    ) -> None:
        if samples < 1:
            raise ValueError(range_message("samples", samples, low=1))
        if not 0.0 <= temperature <= 2.0:
            raise ValueError(range_message("temperature", temperature, low=0, high=2))
        self.client = client
        self.goal = goal
        self.levels = dict(levels or DEFAULT_LEVELS)
        self.samples = samples
        self.variance_threshold = variance_threshold
        self.every_k_steps = max(1, every_k_steps)
        self.max_tokens = max_tokens
        self.use_schema = use_schema
        self.context = context or CallContext(decision_type="reward")
        self.temperature = temperature
        self.previous = _clamp(initial)
        self._cache: MutableMapping[str, float] = {} if cache is None else cache
        self._last_step: int | None = None
        self._variances: dict[str, float] = {}
        self.evaluations = 0
        self.model_calls = 0
        self.cache_hits = 0
        self.rate_limited = 0
        self.fallbacks = 0
        self.parse_failures = 0
        self.high_variance = 0
        self.call_failures = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def prompt(self, state_text: str) -> list[Message]:
        """The messages sent for a transition (the text gives the state before and after)."""
        anchors = "\n".join(f"{lvl} = {desc}" for lvl, desc in sorted(self.levels.items()))
        system = (
            "You are a strict scorer. Compare the state after with the state before, against "
            f'the goal, and answer with one JSON object {{"score": N}} where N is one of '
            f"{sorted(self.levels)}.\nAnchors:\n{anchors}"
        )
        return [Message.system(system), Message.user(f"Goal: {self.goal}\n{state_text}")]

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
            state_text: the transition in words (the state before and after).
            step: the caller's step counter, for the call-rate limit.

        Returns:
            The cached, fresh or previous value.
        """
        if state_text not in self._cache and (
            step is not None
            and self._last_step is not None
            and step - self._last_step < self.every_k_steps
        ):
            self.rate_limited += 1
            return self.previous
        if state_text not in self._cache:
            self._last_step = step
        value = self.evaluate(state_text, tick=step)
        if value is None:
            return self._fallback("no usable score")
        self.previous = value
        return value

    def evaluate(self, state_text: str, *, tick: int | None = None) -> float | None:
        """One evaluation without the previous-value fallback (for callers that keep their own).

        A cached state is answered from the cache; otherwise the model is asked ``samples``
        times. No rate limit applies here (:meth:`score` applies it).

        Args:
            state_text: the transition in words (the state before and after).
            tick: the caller's tick, recorded in the call context.

        Returns:
            The score in [-1, 1], or None when too few samples parsed (``parse_failures``) or
            the samples disagreed (``high_variance``); never NaN.
        """
        if state_text in self._cache:
            self.cache_hits += 1
            return self._cache[state_text]
        self.evaluations += 1
        values = self._sample(state_text, tick)
        need = math.ceil(self.samples / 2)
        if len(values) < need:
            self.parse_failures += 1
            log.info("llm reward: %d of %d samples parsed", len(values), self.samples)
            return None
        arr = np.clip(np.asarray(values, dtype=float), -1.0, 1.0)
        variance = float(arr.var())
        self._variances[state_text] = variance
        if variance > self.variance_threshold:
            self.high_variance += 1
            log.info(
                "llm reward: sample variance %.3f over %.3f", variance, self.variance_threshold
            )
            return None
        value = _clamp(float(arr.mean()))
        self._cache[state_text] = value
        return value

    def _sample(self, state_text: str, tick: int | None) -> list[float]:
        messages = self.prompt(state_text)
        schema = self.schema() if self.use_schema else None
        context = self.context if tick is None else replace(self.context, tick=tick)
        values: list[float] = []
        for _ in range(self.samples):
            try:
                result = self.client.chat(
                    messages,
                    temperature=self.temperature,
                    max_tokens=self.max_tokens,
                    json_schema=schema,
                    context=context,
                )
            except (LLMConnectionError, BudgetExceeded) as exc:
                self.call_failures += 1
                log.info("llm reward: call failed: %s", exc)
                continue
            finally:
                self.model_calls += 1
            self.prompt_tokens += result.usage.prompt_tokens
            self.completion_tokens += result.usage.completion_tokens
            number = parse_score(result.text)
            report_outcome(result, number, None if number is not None else "no number")
            if number is not None:
                values.append(number)
        return values

    def _fallback(self, why: str) -> float:
        self.fallbacks += 1
        log.info("llm reward: fallback to previous value %.3f (%s)", self.previous, why)
        return self.previous

    def _variance_spread(self) -> tuple[float, float]:
        """Mean and largest sample variance over the scored states (0.0, 0.0 before any)."""
        variances = list(self._variances.values())
        if not variances:
            return 0.0, 0.0
        return float(np.mean(variances)), float(np.max(variances))

    def summary(self) -> dict[str, Any]:
        """The counters a training run reports (``metrics.json``'s ``llm_reward``).

        Returns:
            ``calls`` (model calls), ``cache_hits``, ``parse_fallbacks`` (evaluations with too
            few parsable answers, failed calls included), ``variance_fallbacks`` (samples that
            disagreed), ``call_failures``, ``evaluations``, prompt and completion tokens, and the
            mean and largest sample variance per scored state.
        """
        spread = self._variance_spread()
        return {
            "calls": self.model_calls,
            "cache_hits": self.cache_hits,
            "parse_fallbacks": self.parse_failures,
            "variance_fallbacks": self.high_variance,
            "call_failures": self.call_failures,
            "evaluations": self.evaluations,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "variance_mean": spread[0],
            "variance_max": spread[1],
            "temperature": self.temperature,
            "samples": self.samples,
        }

    def stats(self) -> dict[str, Any]:
        """Drift statistics (metric keys under ``llm/reward/``).

        Returns:
            Evaluations, model calls, cache hits, rate-limited steps, fallbacks and their rate,
            parse failures, high-variance evaluations, and the per-state sample variance (mean,
            max, and per state text).
        """
        spread = self._variance_spread()
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
            "llm/reward/call_failures": self.call_failures,
            "llm/reward/prompt_tokens": self.prompt_tokens,
            "llm/reward/completion_tokens": self.completion_tokens,
            "llm/reward/variance_mean": spread[0],
            "llm/reward/variance_max": spread[1],
            "llm/reward/variance_per_state": dict(self._variances),
        }


def _clamp(value: float) -> float:
    if not math.isfinite(value):
        return 0.0
    return min(1.0, max(-1.0, value))


@contextlib.contextmanager
def reward_backend(
    *,
    base_url: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    gguf: str | Path | None = None,
    threads: int = 1,
    seed: int = 0,
) -> Iterator[tuple[ChatClient, list[str]]]:
    """The chat backend of an LLM reward and the secrets its recordings must mask.

    With no base URL (flag, ``FLEETMIND_LLM_BASE_URL`` or ``OPENAI_BASE_URL``) the embedded model
    is started on 127.0.0.1 (``gguf``, else ``FLEETMIND_LLM_GGUF``, else SmolLM2-135M) with its
    sampling generator seeded by ``seed``, and stopped on exit.

    Raises:
        ConfigError: a malformed setting, or the embedded model is not installed.
        LLMConnectionError: the embedded server did not start.
    """
    settings = LLMSettings.from_env(base_url=base_url, model=model, api_key=api_key)
    secrets = [settings.api_key] if settings.api_key else []
    with contextlib.ExitStack() as stack:
        client: ChatClient
        if settings.base_url is None:
            from fleetmind.llm.embedded import EmbeddedServer

            path = gguf or os.environ.get("FLEETMIND_LLM_GGUF") or None
            server = stack.enter_context(EmbeddedServer(path, n_threads=threads, seed=seed))
            client = server.client()
        else:
            from fleetmind.llm.client import OpenAICompatClient

            client = stack.enter_context(OpenAICompatClient.from_settings(settings))
        yield client, secrets


@contextlib.contextmanager
def recorded_reward(
    client: ChatClient,
    calls_path: str | Path,
    *,
    goal: str,
    secrets: list[str] | None = None,
    seed: int | None = None,
    prompt_version: str = "reward-v2",
    **options: Any,
) -> Iterator[LLMReward]:
    """An :class:`LLMReward` on ``client`` whose every call is recorded to ``calls_path``.

    Args:
        client: the backend (see :func:`reward_backend`).
        calls_path: the ``calls.jsonl`` to append to (the format of :mod:`fleetmind.llm.record`).
        goal: what "better" means, in words.
        secrets: strings never to write (API keys).
        seed: the run seed, recorded in each call's context.
        prompt_version: the prompt's version tag.
        **options: more :class:`LLMReward` arguments (``samples``, ``temperature``, ``cache``...).

    Yields:
        The scorer; the recording is flushed and closed on exit.
    """
    context = CallContext(
        caller="rl.reward", decision_type="reward", prompt_version=prompt_version, seed=seed
    )
    with CallRecorder(calls_path, secrets=secrets or []) as recorder:
        yield LLMReward(recorder.wrap(client), goal=goal, context=context, **options)


class ControlScorer:
    """A scorer blind to the state, beside an LLM scorer: a constant, or draws from scores.

    Every claim about an LLM reward stands beside one (DESIGN.md): a result the LLM arm shares
    with a reward that never looks at the state is no result of the LLM's judgement.

    Args:
        values: the LLM arm's scores (what it returned, one per scoring).
        mode: ``constant`` (their mean, every time) or ``random`` (a seeded draw from them).
        seed: the draw's seed.

    Raises:
        ValueError: no values, or an unknown mode.
    """

    def __init__(self, values: Sequence[float], *, mode: str, seed: int = 0) -> None:
        if not values:
            raise ValueError("a control scorer needs the LLM arm's scores; got none")
        if mode not in ("constant", "random"):
            raise ValueError(f"mode: expected 'constant' or 'random', got {mode!r}")
        self.values = np.asarray(values, dtype=np.float64)
        self.mode = mode
        self.mean = float(self.values.mean())
        self._rng = np.random.default_rng(seed)
        self.evaluations = 0

    def evaluate(self, state_text: str, *, tick: int | None = None) -> float | None:
        """The mean, or a random one of the values; the state is not looked at."""
        self.evaluations += 1
        if self.mode == "constant":
            return self.mean
        return float(self.values[int(self._rng.integers(len(self.values)))])

    def summary(self) -> dict[str, Any]:
        """Counters in the shape of :meth:`LLMReward.summary` (no model calls)."""
        return {
            "calls": 0,
            "cache_hits": 0,
            "parse_fallbacks": 0,
            "variance_fallbacks": 0,
            "call_failures": 0,
            "evaluations": self.evaluations,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "variance_mean": 0.0,
            "variance_max": 0.0,
            "control": self.mode,
            "control_from": len(self.values),
        }
