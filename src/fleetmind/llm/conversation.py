"""Multi-role conversations with one backend and a coordinator who decides (§4.2, §2.3).

Each role keeps its own message list and system prompt; only the other roles' structured messages
are appended to it. Messages carry ``role``, ``phase``, ``content``, ``sender`` and ``round``.
The talk stops on the coordinator's ``phase == "decide"``, never on keywords. A round limit
always ends it: when rounds run out, or no role says anything new for ``stall_rounds`` rounds,
the coordinator is asked for a decision with a schema that only allows ``decide``; if even that
fails, a rule-based default is applied. The transcript records why the talk ended.

With ``choices`` the decision is one of a given list of options, enforced by the schema (a small
model then cannot decide something nobody can carry out); a coordinator with no other roles
makes that choice in one call, since there is nobody to discuss with.

Failure this prevents (FIELD-NOTES §2): three agents questioning each other for eight rounds and
never starting, because no role had the final say.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from fleetmind.errors import range_message
from fleetmind.llm.budgets import Budgets, Clock
from fleetmind.llm.chat import CallContext, ChatClient, Message
from fleetmind.llm.structured import structured

log = logging.getLogger(__name__)

Phase = Literal["discuss", "propose", "report", "question", "decide", "error"]
EndReason = Literal["decided", "round_limit", "no_progress", "deadline", "usage_budget"]
DecidedBy = Literal["coordinator", "coordinator_forced", "default", "none"]


class CoordinatorTurn(BaseModel):
    """What the coordinator answers each round."""

    model_config = ConfigDict(extra="forbid")

    phase: Literal["discuss", "decide"]
    content: str = Field(max_length=2000)


class MemberTurn(BaseModel):
    """What another role answers each round."""

    model_config = ConfigDict(extra="forbid")

    phase: Literal["propose", "report", "question"]
    content: str = Field(max_length=2000)


class DecisionTurn(BaseModel):
    """The coordinator's forced decision."""

    model_config = ConfigDict(extra="forbid")

    phase: Literal["decide"]
    content: str = Field(max_length=2000)


@dataclass(frozen=True)
class Role:
    """A participant.

    Attributes:
        name: the sender name (unique in the conversation).
        role: the function, e.g. ``"coordinator"``, ``"executor"``, ``"critic"``.
        system_prompt: the role's own instructions.
    """

    name: str
    role: str
    system_prompt: str


@dataclass(frozen=True)
class TalkMessage:
    """One structured message of a conversation.

    Attributes:
        role: the sender's function.
        phase: the message phase (``error`` when the sender produced nothing valid).
        content: the text.
        sender: the sender name.
        round: 1-based round number.
    """

    role: str
    phase: Phase
    content: str
    sender: str
    round: int

    def render(self) -> str:
        """The text another role sees."""
        return f"[round {self.round}] {self.sender} ({self.role}, {self.phase}): {self.content}"


@dataclass
class Transcript:
    """The record of one conversation.

    Attributes:
        task: the task discussed.
        messages: every structured message in order.
        decision: the final decision text (None only when no decision could be had at all).
        decided_by: ``coordinator``, ``coordinator_forced``, ``default`` or ``none``.
        ended_by: ``decided``, ``round_limit``, ``no_progress``, ``deadline`` or
            ``usage_budget``.
        rounds: rounds held.
        calls: model calls made.
        errors: turns that produced no valid message.
    """

    task: str
    messages: list[TalkMessage] = field(default_factory=list)
    decision: str | None = None
    decided_by: DecidedBy = "none"
    ended_by: EndReason = "round_limit"
    rounds: int = 0
    calls: int = 0
    errors: int = 0


DefaultDecision = Callable[[Transcript], str]

COORDINATOR_FORMAT = (
    'Reply with one JSON object: {"phase": "discuss" or "decide", "content": "..."}. '
    'Use "decide" with the final decision in "content" as soon as you can decide.'
)
CHOICE_FORMAT = (
    'Reply with one JSON object: {{"phase": "decide", "content": "<option>"}}, where <option> is '
    "one of: {options}."
)
MEMBER_FORMAT = (
    'Reply with one JSON object: {"phase": "propose" or "report" or "question", "content": "..."}.'
)


class Conversation:
    """A coordinator and other roles talking over one backend.

    Args:
        client: the shared backend.
        coordinator: the role holding the final decision.
        members: the other roles, in speaking order.
        max_rounds: the round limit (always ends the talk).
        stall_rounds: rounds without anything new before the coordinator must decide.
        default_decision: rule-based decision applied when the coordinator cannot decide.
        turn_budgets: retry budgets of each structured turn.
        deadline_s: wall-clock limit of the whole talk.
        temperature: sampling temperature.
        max_tokens: cap per turn.
        context: caller context for recording and accounting.
        choices: when given, the decision must be one of these strings (see the module doc).
    """

    def __init__(
        self,
        client: ChatClient,
        coordinator: Role,
        members: Sequence[Role],
        *,
        max_rounds: int = 4,
        stall_rounds: int = 2,
        default_decision: DefaultDecision | None = None,
        turn_budgets: Budgets | None = None,
        deadline_s: float | None = None,
        temperature: float = 0.2,
        max_tokens: int = 128,
        context: CallContext | None = None,
        choices: Sequence[str] = (),
    ) -> None:
        names = [coordinator.name, *(m.name for m in members)]
        if len(set(names)) != len(names):
            raise ValueError(f"role names must be unique, got {names}")
        if max_rounds < 1:
            raise ValueError(range_message("max_rounds", max_rounds, low=1))
        self.client = client
        self.coordinator = coordinator
        self.members = list(members)
        self.max_rounds = max_rounds
        self.stall_rounds = max(1, stall_rounds)
        self.default_decision = default_decision
        self.turn_budgets = turn_budgets or Budgets(
            retries={"parse": 1, "validation": 1, "empty": 1, "network": 1, "timeout": 0}
        )
        self.deadline_s = deadline_s
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.context = context
        self.choices = tuple(choices)
        self._decision_cls: type[DecisionTurn] = DecisionTurn
        if self.choices:
            # A str enum: the schema lists the options, and the value still reads as text.
            options = enum.StrEnum("Option", {f"o{i}": c for i, c in enumerate(self.choices)})  # type: ignore[misc]
            self._decision_cls = create_model(
                "ChoiceTurn", __base__=DecisionTurn, content=(options, ...)
            )

    def run(self, task: str) -> Transcript:
        """Hold the conversation.

        Args:
            task: the task, given to every role.

        Returns:
            The transcript with the decision and the reason the talk ended.
        """
        clock = Clock(self.deadline_s)
        transcript = Transcript(task=task)
        history: dict[str, list[Message]] = {
            r.name: [
                Message.system(r.system_prompt.strip() + "\n" + self._format(r)),
                Message.user(f"Task: {task}"),
            ]
            for r in (self.coordinator, *self.members)
        }
        if self.choices and not self.members:
            transcript.rounds = 1
            msg = self._turn(self.coordinator, history, transcript, 1, clock, self._decision_cls)
            if msg is not None and msg.phase == "decide":
                transcript.decision = str(msg.content)
                transcript.decided_by = "coordinator"
                transcript.ended_by = "decided"
                return transcript
            transcript.ended_by = (
                "usage_budget" if msg is None else "deadline" if clock.expired() else "round_limit"
            )
            self._default(transcript)
            return transcript
        seen: set[str] = set()
        stalled = 0
        end: EndReason | None = None
        for rnd in range(1, self.max_rounds + 1):
            transcript.rounds = rnd
            if clock.expired():
                end = "deadline"
                break
            msg = self._turn(self.coordinator, history, transcript, rnd, clock, CoordinatorTurn)
            if msg is None:
                end = "usage_budget"
                break
            if msg.phase == "decide":
                transcript.decision = msg.content
                transcript.decided_by = "coordinator"
                transcript.ended_by = "decided"
                return transcript
            new = self._novel(msg, seen)
            for member in self.members:
                reply = self._turn(member, history, transcript, rnd, clock, MemberTurn)
                if reply is None:
                    end = "usage_budget"
                    break
                new = self._novel(reply, seen) or new
            if end is not None:
                break
            stalled = 0 if new else stalled + 1
            if stalled >= self.stall_rounds:
                end = "no_progress"
                break
        transcript.ended_by = end or "round_limit"
        self._force_decision(history, transcript, clock)
        return transcript

    def _format(self, r: Role) -> str:
        if r is not self.coordinator:
            return MEMBER_FORMAT
        if self.choices and not self.members:
            return CHOICE_FORMAT.format(options=", ".join(self.choices))
        return COORDINATOR_FORMAT

    @staticmethod
    def _novel(msg: TalkMessage, seen: set[str]) -> bool:
        if msg.phase == "error":
            return False
        key = " ".join(msg.content.lower().split())
        if key in seen:
            return False
        seen.add(key)
        return True

    def _turn(
        self,
        speaker: Role,
        history: dict[str, list[Message]],
        transcript: Transcript,
        rnd: int,
        clock: Clock,
        model_cls: type[CoordinatorTurn] | type[MemberTurn] | type[DecisionTurn],
    ) -> TalkMessage | None:
        """One role speaks; returns None when a usage budget stopped the talk."""
        left = clock.remaining()
        budgets = Budgets(
            retries=self.turn_budgets.retries,
            deadline_s=left if left is not None else self.turn_budgets.deadline_s,
            call_timeout_s=self.turn_budgets.call_timeout_s,
        )
        outcome = structured(
            self.client,
            history[speaker.name],
            model_cls,
            budgets=budgets,
            context=self.context,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
        )
        transcript.calls += outcome.attempts
        if outcome.fallback_reason and outcome.fallback_reason.startswith("usage budget"):
            return None
        if outcome.value is None:
            transcript.errors += 1
            msg = TalkMessage(
                speaker.role, "error", outcome.last_error or "no reply", speaker.name, rnd
            )
        else:
            msg = TalkMessage(
                speaker.role, outcome.value.phase, str(outcome.value.content), speaker.name, rnd
            )
            history[speaker.name].append(Message.assistant(outcome.value.model_dump_json()))
        transcript.messages.append(msg)
        if msg.phase != "error":
            for name, msgs in history.items():
                if name != speaker.name:
                    msgs.append(Message.user(msg.render()))
        return msg

    def _force_decision(
        self, history: dict[str, list[Message]], transcript: Transcript, clock: Clock
    ) -> None:
        why = {
            "round_limit": "The round limit is reached.",
            "no_progress": "The talk is making no progress.",
            "deadline": "Time is up.",
            "usage_budget": "The call budget is spent.",
            "decided": "",
        }[transcript.ended_by]
        if transcript.ended_by not in ("deadline", "usage_budget"):
            among = f" with one of: {', '.join(self.choices)}" if self.choices else ""
            history[self.coordinator.name].append(
                Message.user(f'{why} You must decide now: reply with phase "decide"{among}.')
            )
            msg = self._turn(
                self.coordinator, history, transcript, transcript.rounds, clock, self._decision_cls
            )
            if msg is not None and msg.phase == "decide":
                transcript.decision = str(msg.content)
                transcript.decided_by = "coordinator_forced"
                return
        self._default(transcript)

    def _default(self, transcript: Transcript) -> None:
        if self.default_decision is not None:
            transcript.decision = self.default_decision(transcript)
            transcript.decided_by = "default"
            log.info("conversation ended by %s; default decision applied", transcript.ended_by)
