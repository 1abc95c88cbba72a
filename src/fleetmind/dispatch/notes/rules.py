"""Cue rules: what a robot or time mention means, from the words around it (English, Chinese).

Each mention found by :func:`~fleetmind.dispatch.notes.text.extract` is judged from the text of
its clause on both sides (up to the neighbouring mention or the clause's end). A cue closest to
the mention wins; when two end at the same place, the longer (more specific) one wins, so
"not before" beats "before". A few patterns outrank distance because they fix the meaning of
the whole clause ("don't pick it up before 300" is a hold, whatever "before" says).

Cancellations ("ignore the earlier hold", "the fragile label is wrong, anyone can take it",
"之前说只能用5号车，现在不用了") drop the constraints stated before them or in their clause.

A judgement is ``(kind or None, certain)``: ``certain`` is False when no cue spoke for the
mention (a bare robot name, a ``tick 300`` with no verb), which a combined reader hands to the
model and a strict one sends to review.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, replace
from typing import Literal

from fleetmind.dispatch.notes.text import Candidates, RobotMention, TimeMention

RobotVerdict = Literal["only", "not"] | None
TimeVerdict = Literal["deadline", "hold"] | None

# Clause boundaries: punctuation, and connectives that start a new fact.
_CLAUSE = re.compile(
    r"[,.;!?。，；！？\n]|—|–| - |\bthen\b|\balso\b|\bplus\b|\band then\b|而且|并且|然后|但是|另外|同时|此外"
    r"|(?<!any robot )(?<!anyone )(?<!anybody )(?<!everyone )(?<!all )(?<!nobody )(?<!no one )"
    r"(?<!none )(?<!every robot )(?<!any bot )(?<!nothing )(?<!anything )(?<!any unit )(?<!no robot )(?<!no bot )(?<!no unit )"
    r"\bbut\b"
)


def _c(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


# ---------------------------------------------------------------------------- robot cues
# Prefix cues end right before the mention (a small gap allowed); suffix cues start right after.
_ANYONE_BUT = _c(
    r"\b(?:anyone|anybody|anything|any robot|any bot|any unit|everyone|every robot|all|whoever|"
    r"fleet|any other robot|a robot|a unit)\s+(?:but|except|other than|minus)\s*$"
)
# An exception under a negation is the only one allowed ("no robot other than unit 5", "don't
# send anyone except r2", "不得使用除2号以外的车"); without one it is excluded ("anyone but r2").
_NEG_EXCEPT = _c(
    r"\b(?:no|not|nobody|no one|noone|none|nothing|never|neither|don'?t|do not|dont|must not|"
    r"mustn'?t|may not|can'?t|cannot|shouldn'?t|should not|won'?t)\b[^,;.]*?"
    r"\b(?:other than|except(?: for)?|but|apart from|besides|aside from|save for)\s+(?:the\s+)?$"
    r"|(?:不得|不能|不要|不许|不准|禁止|别|勿|不可|没有)\S{0,4}?(?:除了|除)\s*$"
)
# "非3号车不可", "非得4号车来不可": nothing but that robot will do.
_ZH_NON_NOT = (
    _c(r"非(?:得|要)?\s*$"),
    _c(r"^[^,;。]{0,6}?(?:莫属|不(?:可|行|成|送|搬|运|取|接|用|做))"),
)
# "have robot 4 take care of this": a robot made to do the job is the one asked for.
_CAUSATIVE = (
    _c(r"\b(?:have|get|let)\s+(?:the\s+)?$"),
    _c(r"^\s*(?:take|do|handle|carry|deliver|move|pick|bring|run|grab)\b"),
)
_NOT_PRE = [
    _c(r"\b(?:not|never|no|neither)\s+(?:by|with|on|via|to|for|using|use|the|even)?\s*$"),
    _c(
        r"\b(?:not|never)\s+(?:send|use|let|assign|give|dispatch|pick|choose|take|allow)\s+(?:\w+\s+){0,1}?$"
    ),
    _c(
        r"\b(?:don'?t|do not|dont|never|shouldn'?t|should not|must not|mustn'?t|can'?t|cannot|"
        r"may not|won'?t)\s+"
        # Negated verbs of knowing and feeling say nothing about who serves the order.
        r"(?!(?:worry|find|see|know|remember|forget|think|believe|understand|tell|reach|locate|"
        r"mind|care|bother|blame|hear|recall|wait)\b)(?:\w+\s+){0,3}?$"
    ),
    _c(
        r"\b(?:avoid|exclude|excluding|skip|ban|without|except|except for|other than|besides|"
        r"apart from|but not|instead of|rather than|no need for|not for|minus|sans|hands off)\s+(?:the\s+)?$"
    ),
    _ANYONE_BUT,
    _c(r"\bnot\s+(?:be\s+)?(?:\w+\s+){0,2}?(?:by|with|to|on)\s+(?:the\s+)?$"),
    _c(r"\b(?:keep|stay|hands)\s+off\s+(?:of\s+)?$|\b(?:away|clear) from\s+(?:the\s+)?$"),
    _c(
        r"(?:不要|不能|不可以|不准|不许|不得|别|勿|禁止|严禁|避免|避开|不让|不用|千万别|绝对不要|不可|排除)"
        r"\s*(?:派给|分给|交给|交由|安排给|让|用|派|给|由|使用|安排|叫|被)?\s*$"
    ),
    _c(r"(?:只要不是|不是|并非|非)\s*$"),
]
_NOT_SUF = [
    _c(
        r"^\s*(?:must not|mustn'?t|should not|shouldn'?t|can ?not|can'?t|may not|is not allowed|"
        r"isn'?t allowed|not allowed|is banned|banned|is excluded|excluded|is off[- ]limits|"
        r"off[- ]limits|stays? away|keep away|is not to|must never|should never|never|not|"
        r"(?:isn'?t|is not|not be|never be|shouldn'?t be|should not be)\s+(?:involved|used|assigned|"
        r"on it|on this|near it)|"
        # "sit out" and "sit <it> out": the phrasal verb for not taking part.
        r"(?:(?:must|should|can|will|has to|needs to) )?sits? (?:\w+ ){0,2}?out)\b"
    ),
    _c(
        r"^\s*(?:这|那)?(?:两|几|\d)?(?:台|辆|个)?\s*(?:请)?\s*(?:都|也|就)?\s*(?:不要|不能|不可以|不准|不许|不得|别|勿|禁止|禁用|不行|不可|排除|除外|不参与|不碰|不要碰|不能碰|不用|免)"
    ),
    _c(
        r"^\s*(?:\w+\s+){0,5}?(?:must not|mustn'?t|should not|shouldn'?t|cannot|can'?t|may not|"
        r"doesn'?t|does not|won'?t|will not|isn'?t to|is not to|"
        r"is not allow\w*|not allow\w*)\b"
        r"|^\s*(?:that|who|which)?\s*(?:is|are)?\s*(?:banned|excluded|barred)\b"
    ),
]
_KEEP_AWAY = (_c(r"\b(?:keep|stay|leave)\s+$"), _c(r"^\s*(?:away|off|out|clear)\b"))
_BROKEN = (
    _c(
        r"^\s*(?:is |was |has been |'s )?(?:broken|down|faulty|out of service|out of order|"
        r"under repair|unavailable|offline|acting up|glitchy)"
    ),
    _c(
        r"\b(?:use|send|pick|take|get|try)\s+(?:another|a different|someone else|some other|other|a other)"
        r"|换(?:一|别|其他|另)|用别的|用其他|找别的|换个"
    ),
)
_ONLY_PRE = [
    _c(
        r"\b(?:only|just|exclusively|exclusive|solely|strictly|nobody but|no one but|noone but|"
        r"none but|nothing but)\s*:?\s+(?:(?!not\b|no\b|never\b|don)\w+\s+){0,2}?$"
    ),
    _c(
        r"\b(?:reserved?|earmark(?:ed)?|dedicated?|allocated?|assigned|assign(?: it| this)?|give(?: it| this)?|"
        r"hand(?: it| this)?(?: over)?|send(?: it| this)?|route(?: it| this)?|goes|go|belongs)"
        r"\s+(?:to|for|with|via|on)\s+(?:the\s+)?$"
    ),
    _c(
        r"\b(?:must|has to|have to|needs? to|should|shall|gotta|got to)\s+(?:be\s+)?(?:\w+\s+){0,2}?"
        r"(?:by|with|on|via|using|to|use)\s+(?:the\s+)?$"
    ),
    _c(
        r"\b(?:use|using|requires?|needs?|need|want|wants|call|book|let|insists? on|insisted on|"
        r"requested|requests|asked for|asks for|demands?|demanded)\s+(?:the\s+)?$"
    ),
    _c(r"\b(?:send|dispatch|deploy|put)\s+(?:the\s+)?$"),
    _c(r"\b(?:is|are|it'?s|its|one is|order is) (?:for|meant for|reserved for)\s+(?:the\s+)?$"),
    _c(r"\b(?:has to|must|needs to|should|shall) be\s+(?:the\s+)?$"),
    _c(
        r"(?:只能|只有|只让|只准|只许|只可以|只可|只用|只派|只给|只交给|仅限|仅由|仅|只|必须|务必|一定要|一定得|必需|"
        r"指定|专门|请|麻烦|需要|要|限|就用|就让|就给|就派|归)\s*(?:由|用|让|派|给|交给|使用|安排|叫|是)?\s*$"
    ),
    _c(r"(?:交给|派|安排|让|用|由|叫|给|限定|改用|换成|换用)\s*$"),
]
_ONLY_SUF = [
    _c(r"^\s*(?:(?!not\b|no\b|never\b)\w+\s+){0,3}?(?:exclusively|alone|only)\b"),
    _c(r"^\s*(?:gets|takes|owns|handles|does) (?:it|this|this one)\b"),
    _c(
        r"^\s*(?:is|will be) (?:the )?(?:designated|dedicated|assigned|chosen|appointed|"
        r"responsible)\b"
    ),
    _c(r"^\s*(?:独家|专门|包办|全权)|^\s*(?:送|配送)(?!过|了|得|的)"),
    _c(
        # A negative universal right after the robot ("robot 3 and nobody else", "r3, no other
        # robot", "robot 3 or no one"): everyone but it is excluded.
        r"^\s*(?:only|exclusively|alone|(?:and |or |but )?(?:nobody|no one|noone|none|not anyone|no other)\b|"
        r"is the only|"
        r"(?:must|should|has to|needs to|shall) (?:do|take|handle|carry|deliver|move|pick|get|be)"
        r"|takes this|to take this|专用|专属|专送|独享|独占|负责|来送|来搬|来拿|来取|来运|去送|去取)"
    ),
]
_EXCEPT_ZH = _c(r"(?:除了|除)[^\d,;。]{0,6}$")
_EXCEPT_ZH_SUF = _c(r"^\s*(?:以外|之外|除外)")
_ZH_NOT_BUT = _c(r"^\s*(?:车|号)?\s*[,，]?\s*(?:而)?是")
_EXCEPT_ZH_ONLY = _c(
    r"^\s*(?:车|机器人)?\s*(?:以外|之外)?(?:的)?[,\s]*[^,。]*?(?:都不|都别|别的.*不|其他.*不|其它.*不|谁都不|谁也不|谁都别|谁也别|一律不|均不|全都不)"
)

# ---------------------------------------------------------------------------- time cues
_HOLD_STRONG = _c(
    r"\b(?:not before|no earlier than|not earlier than|not until|not till|not prior to|"
    r"no sooner than|not sooner than|earliest pickup|pickup window|no pick(?:ing| ?ups?)?\b|no loading|hold|holding|on hold|wait|waiting|"
    r"release|released|releases|earliest|"
    r"(?:don'?t|do not|dont|never|can'?t|cannot|may not|must not|shouldn'?t|should not|no one|nobody)"
    r"\s+(?:\w+\s+){0,2}?(?:pick|grab|load|touch|collect|move|take|start|lift|pull|get|deliver|"
    r"ship|send|dispatch|bring|drop)\w*\s+(?:\w+\s+){0,2}?(?:before|earlier than|sooner than|prior to)"
    r"|(?:don'?t|do not|dont|never|can'?t|cannot|may not|must not|shouldn'?t|should not|no one|nobody)"
    r"\s+(?:\w+\s+){0,2}?(?:pick|grab|load|touch|collect|move|take|start|lift|pull|get)"
    r"|no pick ?ups?|not (?:be )?(?:picked|loaded|collected|grabbed|touched|moved|lifted)|"
    r"give it|leave it|keep it|stays? (?:put|on the shelf)|not ready|window opens|opens at|sooner than|"
    r"(?:isn'?t|is not|won'?t be|will not be|not yet) ready|"
    r"sit on it|let it sit|park it|park this|leave this|let this sit|"
    r"(?:don'?t|do not|dont|never|can'?t|cannot|may not|must not|shouldn'?t|should not)\s+"
    r"(?:\w+\s+){0,3}?(?:pick|grab|load|touch|collect|move|lift|pull|leave)\w*\b|"
    r"(?:must not|mustn'?t|can'?t|cannot|don'?t|do not|nothing|no one|nobody|may not|should not)\s+"
    r"(?:\w+\s+){0,2}?(?:leaves?|leave the shelf|dispatch\w*|send\w*|ship\w*|go|goes|move\w*|out)\b"
    r"[^,]*?\b(?:before|earlier|sooner|until|prior to))"
    r"|等到|等|暂缓|暂扣|扣住|扣到|压到|留到|先放|先别|先不要|(?:不|别|勿)\S{0,2}早于|不要提前|别提前|不能提前|勿提前|过"
    r"|最早|最快|起码等|至少等|延后|推迟|晚点|过会"
    # "ship after 200", "deliver it no earlier than 300": leaving after T is a hold at T.
    r"|\b(?:ship|deliver|send|dispatch|leave|go|move)\w*\s+(?:\w+\s+){0,2}?"
    r"(?:after|no earlier than|not before|not until)\s*$"
)
_HOLD_PRE = _c(
    r"\b(?:after|starting|on or after|until|no earlier|ready at|ready after|ready in|once|"
    r"available at|available after|available from|pick(?:ed)? up (?:only )?(?:at|after|from|in))\s+(?:\w+\s+){0,1}?$"
)
# Hold cues that follow in a later clause ("tick 250, no pickup earlier").
_HOLD_LATER = _c(
    r"^[^.;。；]{0,12}?(?:之前|以前|此前)\s*(?:都|还)?\s*(?:请)?\s*(?:不能|不要|别|不许|勿|不可)"
    r"|^[^.;]{0,40}?\b(?:no pick ?ups? earlier|not earlier|no earlier|not before (?:that|then)|until then|"
    r"(?:it )?can go|can be (?:picked|collected|loaded|moved))\b"
)
# Deadline cues in a later clause that point back at the time ("truck leaves at tick 1650, so
# it must be there before that", "在那之前送到").
_DEADLINE_LATER = _c(
    r"^[^.;]{0,60}?\b(?:before|by|no later than|prior to|ahead of) (?:that|then|that time|this time)\b"
    r"|^[^.;。；]{0,20}?(?:在)?(?:那|这|此)之前\s*(?:要|必须|得|请)?\s*(?:送|到)"
)
# Weak hold cues: a time word, never a bare number ("from 1200 to 1300", "from the 2nd shift").
_HOLD_WEAK = _c(r"\b(?:from|start|starting at)\s+(?:\w+\s+){0,1}?$")
_HOLD_SUF = _c(
    r"^\s*(?:from now |after arrival |from arrival |later )?(?:at the earliest|earliest|or later|onwards?|"
    r"(?:it )?can go|can be (?:picked|collected|loaded|moved)|not earlier|"
    r"and later|and after|or after|or afterwards|have (?:elapsed|passed)|has (?:elapsed|passed)|elapse|pass|before (?:pick|load|grab|collect|"
    r"anyone|it can|you can|taking|touching|moving)|"
    r"(?:之后|以后|后|起|开始)|才|再|方可)"
)
_DEADLINE_PRE = _c(
    r"\b(?:before|by|within|inside|in under|under|in less than|less than|no later than|"
    # "due to" (because of) and "due for" (a robot's service) set no time limit.
    r"not later than|latest|at the latest|deadline|due(?!\s+(?:to|for)\b)|deliver|"
    r"delivered|delivery|ship|shipped|drop off|dropped off|have until|got until|has until|cutoff|"
    # "make that 1850", "make it 300": a correction, not "make the 1800 truck".
    r"cut-off|expires?|asap|beat|make(?!\s+(?:that|it)\b)|catch|in time for|late after|late past|late if after|"
    r"late beyond|refund after|not after|closes at|closing at|closes|shuts at|prior to|ahead of|"
    r"(?:hard |time )?limit(?: is| of| at)?)"
    r"\s+(?:\w+\s+){0,3}?$"
    r"|(?:截止|最晚|最迟|不晚于|不迟于|限时|限|务必在|必须在|要在|请在|得在|于|只给|只有|赶上|赶在|赶|期限|时限)\s*(?:时间|日期|时刻)?\s*(?:到|在|是|为|改成|改为|改到|定为|调整为|调到)?\s*(?:下单|到货|入库|到达|收单)?后?\s*$"
)
# Weak cues: a duration ("in 25 ticks") or a time word, never a bare number ("pack in 2 boxes").
_DEADLINE_WEAK = _c(
    r"\b(?:in|max|at most|under|in under|tops|next|in the next|you have|you've got|you got|"
    r"we have)\s+(?:\w+\s+){0,1}?$"
)
_DEADLINE_SUF = _c(
    r"^\s*(?:from now |after arrival |from arrival )?(?:at the latest|latest|or earlier|or sooner|or less|deadline|max|at most|tops|"
    r"(?:delivery |drop-?off |shipping )window|(?:is )?(?:the )?(?:cutoff|cut-off|deadline)|top\b|"
    r"(?:from (?:now|arrival) )?to (?:drop-?off|deliver|delivery|get it|reach|the station)|"
    r"(?:之前|以前|前|之内|以内|内|为止|截止|送达|送到))"
)
_ZH_NEG_BEFORE = _c(r"(?:别|不要|不能|不许|勿|不可|不准|不得)\s*(?:在|于)?\s*$")
# "1200之前都不在" (nobody there before 1200): nothing can go before it, a hold.
_ZH_BEFORE_ABSENT = _c(
    r"^\s*(?:之前|以前|前)\s*(?:都|还|先)?\s*(?:不在|没人|不收|不开|关门|没开|不收货)"
)
_ZH_BEFORE_PICK = _c(r"^\s*(?:之前|以前|前)\s*(?:取|拿|搬|提|动|拣|装|出库|领)")
_ZH_BEFORE_NO_PICK = _c(
    r"^\s*(?:之前|以前|前|之内|以内|内)\s*(?:都|先|还)?\s*(?:请)?\s*(?:不要|不能|别|不许|勿|不可以|不准|不得|无法|没法|不可|不)\s*(?:\w{0,2})?(?:取|拿|搬|提|动|拣|装|出库|领|送|发|运|放行)"
)
# "Don't deliver after tick 700", "不要在700以后送到": a negated "after" is a deadline.
_NEG_AFTER = (
    _c(
        r"\b(?:don'?t|do not|dont|never|must not|mustn'?t|can'?t|cannot|shouldn'?t|should not|not)\s+"
        r"(?:\w+\s+){0,3}?(?:after|later than|past)\s*$"
        r"|(?:不要|别|不能|不可|勿|不得|不许)\s*(?:在|于)?\s*$"
    ),
    _c(r"^\s*(?:以后|之后|后)\s*(?:才)?\s*(?:送|到|交|运)"),
)

# ---------------------------------------------------------------------------- cancellations
_CANCEL_ALL = _c(
    r"\b(?:ignore|disregard|scratch that|never mind|nevermind|nvm|cancel|cancell?ed|no longer|"
    r"not needed|no need|not required|doesn'?t matter|does not matter|lifted|removed|revoked|void|"
    r"is wrong|was wrong|are wrong|mistake|by mistake|in error|not anymore|no constraints?|"
    r"no restrictions?|unrestricted|was dropped|were dropped|been dropped|not restricted|"
    r"no longer restricted)\b|没有限制|无限制|没限制"
    r"|\b(?:scrap|scrapped|forget|unrelated|not related|irrelevant|not affected|isn'?t affected|"
    r"no impact|doesn'?t affect|does not affect)\b|不影响"
    r"|不(?:用|需要|必)[^\d号]{0,3}了|取消|作废|撤销|撤回|搞错|弄错|写错|说错|标错|无效|不算|不再|不用管|忽略|无关"
)
_CANCEL_ROBOT = _c(
    r"\b(?:anyone can|anybody can|any robot (?:can|is fine|will do|works)|whoever|any bot|"
    r"whichever robot|any free robot|anyone is fine|anyone's fine|anyone will do|anyone ok|"
    r"any robot is ok|free for all|don'?t care which|doesn'?t care which|do not care which|"
    r"don'?t mind which)\b|无所谓|不在乎|谁都可以|谁都行|哪台都|哪个都|随便哪|任意|都可以送|都能送"
)
_CANCEL_TIME = _c(
    r"\b(?:whenever|no rush|any ?time(?!\s+(?:after|before|from|until|past|later than)\b)|no deadline|"
    r"no hurry|take your time)\b|随时|不急|不着急|没有时限|不限时"
)


@dataclass(frozen=True)
class Judgement:
    """What the cue rules make of one mention.

    Attributes:
        kind: the constraint kind, or None (a mention that constrains nothing).
        certain: whether a cue decided it (False: no cue spoke; a model or a person may judge).
        sticky: an exception construction ("anyone but robot_2", "除了6号车，谁都可以"): its
            "anyone can" is part of the constraint, not a cancellation.
        doubt: why the rules cannot read this mention with confidence (a conditional, a
            correction with nothing to correct): the note goes to review.
    """

    kind: str | None
    certain: bool
    sticky: bool = False
    doubt: str | None = None


def _clause_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    left = 0
    for m in _CLAUSE.finditer(text, 0, start):
        left = m.end()
    after = _CLAUSE.search(text, end)
    return left, (after.start() if after else len(text))


def _windows(c: Candidates, start: int, end: int, *, clause: bool = True) -> tuple[str, str]:
    """The text before and after a mention, within its clause and between its neighbours."""
    left, right = _clause_bounds(c.text, start, end) if clause else (0, len(c.text))
    for s, e in [(r.start, r.end) for r in c.robots] + [(t.start, t.end) for t in c.times]:
        if e <= start:
            left = max(left, e)
        elif s >= end:
            right = min(right, s)
    # A colon introduces what it labels ("deadline: t=300", "exclusive: robot_2").
    # Brackets are transparent to cue adjacency ("within the hour (60 ticks)").
    return tuple(  # type: ignore[return-value]
        re.sub(r"[:()\[\]]", " ", w) for w in (c.text[left:start], c.text[end:right])
    )


def _best(
    pre: str, suf: str, cues: dict[str, tuple[list[re.Pattern[str]], list[re.Pattern[str]]]]
) -> str | None:
    """The kind whose cue sits closest to the mention (ties: the longer cue)."""
    best: tuple[int, int, str] | None = None
    for kind, (pres, sufs) in cues.items():
        for p in pres:
            m = p.search(pre)
            if m:
                key = (len(pre) - m.end(), -(m.end() - m.start()), kind)
                best = key if best is None or key < best else best
        for p in sufs:
            m = p.search(suf)
            if m:
                key = (m.start(), -(m.end() - m.start()), kind)
                best = key if best is None or key < best else best
    return None if best is None else best[2]


# "robot 1 is fine", "4号没问题": the robot may serve; "不一定要3号车", "robot 3 isn't required":
# a requirement denied. Both say for certain that the mention constrains nothing.
_FINE = _c(
    r"^\s*(?:车|机器人)?\s*(?:is |'s )?(?:fine|ok|okay|good|all right|alright|can do it|works)\b"
    r"|^\s*(?:车|机器人)?\s*(?:没问题|没事|可以用|能用|也行|也可以)"
    r"|^\s*(?:isn'?t|is not|not) (?:required|needed|necessary|mandatory)\b"
    r"|^\s*(?:车|机器人)?\s*(?:不是必须|并非必须|不是必需)"
)
_NOT_NEEDED = _c(
    r"(?:不一定|不必|未必|不用非得?|并不需要|不需要|不是非得?)\S{0,3}$"
    r"|\b(?:not necessarily|doesn'?t have to be|does not have to be|no need for|need not be)\s+(?:the\s+)?$"
)
# A robot's own state ("robot 3 is busy until tick 600", "3号车到600之前都在忙"): a time in
# that clause is the robot's, not a limit on the order.
_ROBOT_STATE = _c(
    r"\b(?:busy|charging|recharging|in maintenance|under maintenance|in service|being serviced|"
    r"offline|occupied|tied up|on break|out until|unavailable|booked)\b"
    r"|在忙|都忙|忙到|充电|维修|保养|检修|被占用|有任务"
)


# "the only robot not allowed is robot 3": the predicate's polarity goes to the robot named.
_THE_ONLY = _c(r"\bthe only (?:robot|one|unit|bot|agv|vehicle)\b(.{0,40}?)\s(?:is|are|=)\s*$")
# "rbt 3 pls": a robot named alone in a request is the one asked for.
_PLEASE = _c(r"^\s*(?:please|pls|plz)\s*[!.]*\s*$")


def judge_robot(c: Candidates, mention: RobotMention) -> Judgement:
    """Only, not, or nothing, for one robot mention."""
    pre, suf = _windows(c, mention.start, mention.end)
    if m := _THE_ONLY.search(pre):
        negated = re.search(r"\bnot\b|n'?t\b|excluded|banned|barred|forbidden", m.group(1))
        return Judgement("not_robot" if negated else "only_robot", True)
    if _NEG_EXCEPT.search(pre):
        return Judgement("only_robot", True, sticky=True)
    if _ZH_NON_NOT[0].search(pre) and _ZH_NON_NOT[1].search(c.text[mention.end :]):
        return Judgement("only_robot", True, sticky=True)
    if (
        _CAUSATIVE[0].search(pre)
        and _CAUSATIVE[1].search(suf)
        and not any(p.search(pre) for p in _NOT_PRE)
    ):
        return Judgement("only_robot", True)
    if _EXCEPT_ZH.search(pre):
        rest = c.text[mention.end :]
        kind = "only_robot" if _EXCEPT_ZH_ONLY.search(rest) else "not_robot"
        return Judgement(kind, True, sticky=True)
    if _EXCEPT_ZH_SUF.search(suf):
        rest = c.text[mention.end :]
        kind = "only_robot" if _EXCEPT_ZH_ONLY.search(rest) else "not_robot"
        return Judgement(kind, True, sticky=True)
    if _ZH_NOT_BUT.search(c.text[mention.end :]) and re.search(r"不是\s*$", pre):
        return Judgement(None, True)  # "不是5号，是6号车": a correction, not an exclusion
    if _ANYONE_BUT.search(pre):
        return Judgement("not_robot", True, sticky=True)
    if _FINE.search(suf) or _NOT_NEEDED.search(pre):
        return Judgement(None, True)
    if _PLEASE.search(suf) and not any(p.search(pre) for p in _NOT_PRE):
        return Judgement("only_robot", True)
    if _KEEP_AWAY[0].search(pre) and _KEEP_AWAY[1].search(suf):
        return Judgement("not_robot", True)
    rest = c.text[mention.end :]
    if _BROKEN[0].search(suf) and _BROKEN[1].search(rest):
        return Judgement("not_robot", True)
    best = _best(
        pre, suf, {"not_robot": (_NOT_PRE, _NOT_SUF), "only_robot": (_ONLY_PRE, _ONLY_SUF)}
    )
    # "anyone can take it, just not robot 2", "谁都行就是不要1号车": the "anyone" is the rest of an
    # exception, not a cancellation.
    left, _ = _clause_bounds(c.text, mention.start, mention.end)
    sticky = best == "not_robot" and bool(_CANCEL_ROBOT.search(c.text, left, mention.start))
    return Judgement(best, best is not None, sticky=sticky)


# "超过2750送到要罚款": arriving past the time costs something, a deadline.
_PAST_PENALTY = (
    _c(r"(?:超过|晚于|迟于|过了)\s*$"),
    _c(r"^[^,;。；]{0,12}?(?:罚|扣钱|扣款|拒收|算迟到|违约|赔)"),
)


def judge_time(c: Candidates, mention: TimeMention) -> Judgement:
    """Deadline, hold, or nothing, for one time mention."""
    pre, suf = _windows(c, mention.start, mention.end)
    if _PAST_PENALTY[0].search(pre) and _PAST_PENALTY[1].search(suf):
        return Judgement("deadline", True)
    left, right = _clause_bounds(c.text, mention.start, mention.end)
    if _ROBOT_STATE.search(c.text, left, right) and any(left <= r.start < right for r in c.robots):
        return Judgement(None, True)
    if _NEG_AFTER[0].search(pre) and (
        re.search(r"[a-z]\s*$", pre) is not None or _NEG_AFTER[1].search(suf)
    ):
        return Judgement("deadline", True)
    if (
        _ZH_BEFORE_NO_PICK.search(suf)
        or _ZH_BEFORE_ABSENT.search(suf)
        or _HOLD_STRONG.search(pre)
        or (_ZH_NEG_BEFORE.search(pre) and _ZH_BEFORE_PICK.search(suf))
    ):
        return Judgement("hold", True)
    deadline_pre = [_DEADLINE_PRE, _DEADLINE_WEAK] if mention.explicit else [_DEADLINE_PRE]
    hold_pre = [_HOLD_PRE, _HOLD_WEAK] if mention.explicit else [_HOLD_PRE]
    cues = {"hold": (hold_pre, [_HOLD_SUF]), "deadline": (deadline_pre, [_DEADLINE_SUF])}
    kind = _best(pre, suf, cues)
    if kind is None and mention.explicit:
        # A time with no cue in its clause: the cue may sit in a neighbouring one ("Need this
        # delivered, latest, 70 ticks after it comes in").
        wide_pre, wide_suf = (
            re.sub(r"[,;，；]", " ", w)
            for w in _windows(c, mention.start, mention.end, clause=False)
        )
        if _HOLD_STRONG.search(wide_pre) or _HOLD_LATER.search(wide_suf):
            return Judgement("hold", True)
        if _DEADLINE_LATER.search(wide_suf):
            return Judgement("deadline", True)
        kind = _best(wide_pre, wide_suf, cues)
    if kind is not None:
        return Judgement(kind, True)
    # An explicit time with no verb ("t=300") may still be a constraint: not certain.
    return Judgement(None, not mention.explicit)


def cancelled(c: Candidates, kind: str, start: int, *, sticky: bool = False) -> bool:
    """Whether a cancellation later in the note (or in the same clause) drops this constraint."""
    left, _ = _clause_bounds(c.text, start, start)
    pats = [_CANCEL_ALL]
    if kind in ("deadline", "hold"):
        pats.append(_CANCEL_TIME)
    elif not sticky:
        pats.append(_CANCEL_ROBOT)
    _, right = _clause_bounds(c.text, start, start + 1)
    spans = [(r.start, r.end) for r in c.robots] + [(t.start, t.end) for t in c.times]
    for p in pats:
        for m in p.finditer(c.text):
            lo, hi = _clause_bounds(c.text, m.start(), m.end())
            if _CONSEQUENCE.search(c.text[max(0, m.start() - 12) : m.start()]) or _NO_OTHER.search(
                c.text, lo, hi
            ):
                # "or else the order is cancelled", "别的车不用管": no cancellation of the note.
                continue
            if left <= m.start() < right:
                return True  # in the constraint's own clause
            # A later clause cancels what came before only when it names nothing itself
            # ("that's cancelled", "现在不用了"); one that names a robot or a time
            # ("原来的680作废") cancels what it names.
            if m.start() >= right and not any(lo <= s0 < hi for s0, _ in spans):
                return True
    return False


_CONSEQUENCE = _c(r"(?:否则|不然|要不|\botherwise|\bor else|\bor they|\bor the customer)\W*\w*\W*$")
_CONJ = _c(r"^\s*(?:and|or|&|\+|/|nor|and also|或者|或|和|与|跟|及|同|、|,)\s*(?:the\s+)?$")
_NO_OTHER = _c(
    r"\b(?:no other (?:bot|robot|one)s?|nobody else|no one else|noone else|not anyone else|"
    r"no one but|others? (?:can'?t|cannot|must not|may not))\b"
    r"|(?:别的|别得|其他|其它|其余)(?:的)?(?:车|机器人|人)?(?:都)?(?:不|别)(?:行|要|能|可以|许|准|动|碰)?"
)
_PRONOUN_NOT = _c(
    r"(?:不能|不要|别|不可以|不准|不许)(?:用|派|让|叫|给)(?:它|他|这台|这辆)"
    # Chinese drops the object: "2号夹爪松了，先别用" (don't use [it]).
    r"|(?:先|暂时|暂|就|也)?(?:别|不要|不能|勿|不准)(?:再)?(?:用|派|使用|安排)(?:了)?(?=[,.;!?。，；！？])"
    r"|\b(?:don'?t|do not|never|can'?t|cannot|rather not|prefer not to)\s+(?:use|send|assign|route|"
    r"give|let|dispatch|schedule|book|put|see|have|get)\b(?:\s+\w+){0,3}?\s+"
    r"(?:it|him|her|that one|that robot|them)\b"
    r"|\bkeep (?:it|him|her|them) (?:off|away|out)\b|\b(?:neither|none) of them\b"
)
_HANDS_OFF = _c(r"\b(?:hands off|keep away|stay away|off limits|not this one)\s*[,:]?\s*$")
_USE_OTHER = _c(
    r"\b(?:use|send|pick|take|get|try)\s+(?:another|a different|someone else|some other|other|a other)\b"
    r"|\b(?:someone else|somebody else|anyone else|anybody else|something else|another robot|"
    r"another one|a different robot|a different one|any other (?:unit|robot|bot|one))\b"
    r"|(?:安排|派|用|找|给|交给|换)(?:其他|其它|别的)|(?:其他|其它|别的)车辆"
    r"|(?:别的|别得|其他|其它|换别的|换别得|换个|换)\s*(?:车|机器人)?\s*(?:送|来|去|拿|取|搬)|换别的|换别得|换个|换一台|换一辆"
)
_PRONOUN_ONLY = _c(
    r"(?:就给它|交给它|给它送|让它(?:送|来|去)|就用它|就派它|只能它|只有它)"
    r"|\b(?:only|just) (?:you|it|him|her|that one|that robot)\b"
)


def judge_all(c: Candidates) -> list[tuple[RobotMention | TimeMention, Judgement]]:
    """The judgement of every mention, with what one mention says about its neighbours.

    Beyond :func:`judge_robot` and :func:`judge_time`: a robot joined to a judged one by "and",
    "or", "和" shares its judgement ("avoid r2 and r6"); a clause with no mention of its own that
    excludes everyone else ("no other bot", "别的车不行") makes the robot before it the only
    one; a clause that refers back ("don't use it", "不能用它") applies to the robot before it.
    """
    robots = [(r, judge_robot(c, r)) for r in c.robots]
    for _ in range(2):  # forward, then backward: the cue may sit on either end of a list
        for i in range(1, len(robots)):
            (a, ja), (b, jb) = robots[i - 1], robots[i]
            if _CONJ.match(c.text[a.end : b.start]):
                # Only into a mention no cue spoke for: "4号没问题" (robot 4 is fine) stays.
                if jb.kind is None and not jb.certain and ja.kind is not None:
                    robots[i] = (b, ja)
                elif ja.kind is None and not ja.certain and jb.kind is not None:
                    robots[i - 1] = (a, jb)
    for i, (r, j) in enumerate(robots):
        if j.kind == "not_robot":
            continue
        # The next robot mentioned after this one (a range's robots share one span).
        nxt = next((m.start for m, _ in robots[i + 1 :] if m.start >= r.end), len(c.text))
        # The note's end closes a clause; the next robot's start does not.
        after = c.text[r.end : nxt] + ("." if nxt == len(c.text) else "")
        _, clause_end = _clause_bounds(c.text, r.start, r.end)
        tail = c.text[clause_end:nxt]
        if j.kind is None and _HANDS_OFF.search(c.text[: r.start]):
            robots[i] = (r, Judgement("not_robot", True))
        elif _NO_OTHER.search(tail) or _PRONOUN_ONLY.search(tail):
            robots[i] = (r, Judgement("only_robot", True))
        elif (j.kind is None and _USE_OTHER.search(tail)) or (
            j.kind is None and _PRONOUN_NOT.search(after[max(0, clause_end - r.end) :])
        ):
            robots[i] = (r, Judgement("not_robot", True))
    times = [(t, judge_time(c, t)) for t in c.times]
    out: list[tuple[RobotMention | TimeMention, Judgement]] = [*robots, *times]
    return sorted(out, key=lambda mj: mj[0].start)


# ---------------------------------------------------------------------------- scope
# Self-repair: what follows the last of these replaces what came before ("keep robot 2 off this
# - sorry, I meant robot 6", "hold till 250, no wait, 280", "不要用2号车，说错了，是4号").
_REPAIR = _c(
    r"\b(?:sorry|i meant|i mean|meant to say|correction|corrected|no wait|wait,? no|make that|"
    r"make it|or rather|typo|my mistake|my bad|scratch that|oops|switch(?:ing|ed)? to)\b|\bno\s*[-,]"
    r"|不对|说错|写错|打错|更正|纠正|哦不|我是说|我的意思是|改成|改为|应该是|改用|换成|换用"
)
# A constraint about another order than this one ("the 400 cutoff is for the other order").
_OTHER_ORDER = _c(
    r"\b(?:other|another|different|separate|sister|neighbou?ring)\s+"
    r"(?:customer'?s?\s+)?(?:orders?|shipments?|deliver(?:y|ies)|batch(?:es)?|jobs?|consignments?|"
    r"tickets?|pick lists?)\b"
    r"|\b(?:yesterday|last week|last month|this morning)(?:'s| is)?\s+(?:orders?|shipments?|batch(?:es)?|"
    r"deliver(?:y|ies)|waves?|jobs?)\b"
    r"|(?:另一|另外一|另|别的|其他|其它|隔壁那?)\s*(?:个|张)?\s*(?:订单|单)"
)
_NOT_THIS_ORDER = _c(r"\bnot (?:for )?(?:this|ours|our) (?:one|order)\b|不是(?:这|本)(?:一)?单")
# A request that was declined is not a constraint ("they asked for it within 30 ticks; we said
# we can't promise", "客户想要300之前送到，我们没答应").
_REQUEST = _c(
    r"\b(?:asked|asks|ask|wanted|wants|want|requested|requests|request|would like|wished|wish|"
    r"hoped|hopes|hope|prefers?|preferred|begged|ideally|preferably)\b|想要|要求|希望|想|提出|请求|最好"
)
_DECLINE = _c(
    r"\b(?:declined|decline|refused|refuse|rejected|turned (?:it |that |them |this )?down|"
    r"denied|can'?t promise|cannot promise|can'?t guarantee|cannot guarantee|not possible|"
    r"impossible|unable|can'?t do (?:it|that)|cannot do (?:it|that)|we can'?t|we cannot|"
    r"we said no|told (?:them|him|her) no|said no)\b"
    r"|没答应|没有答应|没同意|没有同意|不同意|拒绝|做不到|办不到|无法保证|不能保证|保证不了|答应不了"
    r"|不能答应|无法满足|满足不了|没办法"
)
# A clause that states a condition ("if robot 2 is free, use it"): what it sets is not certain.
_CONDITION = _c(
    # A polite "if" ("grateful if it could be held", "if possible") states no condition.
    r"(?<!grateful )(?<!appreciate it )(?<!appreciated )(?<!glad )(?<!happy )"
    r"\b(?:if|unless|in case|provided|assuming)\b(?!\s+possible)(?!\s+(?:\w+\s+){0,4}?(?:could|would)\b)"
    r"|如果|要是|假如|万一|除非|若是|的话"
)

# Words of time limits: a note with one and a stated time no cue places cannot be read with
# confidence.
TIME_TALK = _c(
    r"\b(?:deadline|due(?!\s+(?:to|for)\b)|hold|until|before|after|latest|earliest|within|cutoff|"
    r"cut-off|no later|"
    r"no earlier|wait|pick ?up|deliver\w*|ship\w*)\b|截止|期限|之前|以前|以后|之后|送达|最晚|最早|等到|才能"
)

_UNAVAILABLE = _c(
    r"\b(?:is|are|'s|goes|went|gets)\s+(?:down|broken|busy|unavailable|offline|out of service|"
    r"not available|away|charging)\b|\b(?:breaks down|isn'?t available|is not available)\b"
    r"|不在|坏了|没空|在忙|不能用|用不了|没电"
)

Judged = list[tuple[RobotMention | TimeMention, Judgement]]


def _sentence(text: str, start: int) -> tuple[int, int]:
    """The sentence around ``start`` (split at . ; ! ? and their Chinese forms)."""
    left = max((m.end() for m in re.finditer(r"[.;!?。；！？\n]", text[:start])), default=0)
    after = re.search(r"[.;!?。；！？\n]", text[start:])
    return left, (start + after.start() if after else len(text))


def _repaired(c: Candidates, judged: Judged) -> Judged:
    """The last self-repair wins: later mentions replace earlier ones of the same family.

    A mention after the repair with no cue of its own takes the kind of the one it corrects
    ("hold till 250, no wait, 280" -> a hold at 280).
    """
    marks = list(_REPAIR.finditer(c.text))
    for mark in reversed(marks):
        before = [(m, j) for m, j in judged if m.end <= mark.start() and j.kind is not None]
        after = [(m, j) for m, j in judged if m.start >= mark.end()]
        if not after:
            continue
        if not before:
            return judged
        last = {
            fam: next((j for m, j in reversed(before) if isinstance(m, cls)), None)
            for fam, cls in (("robot", RobotMention), ("time", TimeMention))
        }
        # A repair that states its own constraint of a family ("bot 3 is fine, it's bot 8 we
        # can't use") leaves its bare mentions of that family bare.
        stated = {"robot" if isinstance(m, RobotMention) else "time" for m, j in after if j.kind}
        out: Judged = []
        for m, j in judged:
            fam = "robot" if isinstance(m, RobotMention) else "time"
            prior = last[fam]
            if m.start >= mark.end() and j.kind is None and prior is not None and fam not in stated:
                j = replace(prior, certain=True)
            out.append((m, j))
        replaced = {
            ("robot" if isinstance(m, RobotMention) else j.kind)
            for m, j in out
            if m.start >= mark.end() and j.kind is not None
        }
        return [
            (m, Judgement(None, True))
            if m.end <= mark.start()
            and j.kind is not None
            and ("robot" if isinstance(m, RobotMention) else j.kind) in replaced
            else (m, j)
            for m, j in out
        ]
    return judged


def _out_of_scope(c: Candidates, m: RobotMention | TimeMention) -> bool:
    """Whether the mention belongs to another order or to a request that was declined."""
    left, right = _clause_bounds(c.text, m.start, m.end)
    s_left, s_right = _sentence(c.text, m.start)
    if _OTHER_ORDER.search(c.text, left, right) or _NOT_THIS_ORDER.search(c.text, s_left, s_right):
        return True
    if _REQUEST.search(c.text, s_left, m.start):
        return any(d.start() >= right for d in _DECLINE.finditer(c.text))
    return False


# "the deadline moved from tick 700 to tick 760", "取货时间从500延后到560": the later value
# replaces the earlier; its kind is the one the sentence names, else the earlier one's.
_CHANGE = _c(r"(?:\bfrom|从|由|不是|\bnot)\s*$")
_CHANGE_TO = _c(
    r"^\s*(?:\w+\s+){0,3}?(?:to|until)\s*$|^\s*(?:推迟|延后|延迟|提前|改|调整|移|挪|延长)?\s*(?:到|至|为|成)\s*$"
    # "不是300，是3000", "not 300 but 3000"
    r"|^\s*[,;]?\s*(?:而|但)?是\s*$|^\s*[,;]?\s*(?:but|it'?s|it is)\s*(?:tick\s*)?$"
)
_NAMES_DEADLINE = _c(r"\b(?:deadline|due|cutoff|cut-off|delivery)\b|截止|送达|最晚|时限|期限|交货")
_NAMES_HOLD = _c(r"\b(?:pick ?up|hold|release|collection)\b|取货|出库|提货|放行")
# A wish, not a requirement ("ideally before 800", "最好700之前"): the rules do not guess.
_PREFERENCE = _c(
    r"\b(?:ideally|preferably|if possible|if you can|would be nice|nice to have|no preference)\b"
    r"|尽量|最好|如果可以|可以的话|能的话"
)


def _changed(c: Candidates, judged: Judged) -> Judged:
    """A time changed "from A to B": A is dropped, B takes the kind the sentence names."""
    out = list(judged)
    for i, (a, ja) in enumerate(out):
        if not isinstance(a, TimeMention) or not _CHANGE.search(
            c.text[max(0, a.start - 8) : a.start]
        ):
            continue
        nxt = next((k for k in range(i + 1, len(out)) if isinstance(out[k][0], TimeMention)), None)
        if nxt is None:
            continue
        b, jb = out[nxt]
        if not _CHANGE_TO.search(c.text[a.end : b.start]):
            continue
        s_left, s_right = _sentence(c.text, a.start)
        sentence = c.text[s_left:s_right]
        kind = (
            "deadline"
            if _NAMES_DEADLINE.search(sentence)
            else "hold"
            if _NAMES_HOLD.search(sentence)
            else ja.kind or jb.kind
        )
        out[i] = (a, Judgement(None, True))
        out[nxt] = (b, Judgement(kind, True) if kind else jb)
    return out


# A window: "between tick 700 and tick 800", "window 1100-1200", "700到800之间": no pickup
# before the first, delivered before the second.
_WINDOW_PRE = _c(r"\bbetween\s+(?:\w+\s+)?$|\bwindows?\b[^.;,]{0,12}$")
_WINDOW_MID = _c(r"^\s*(?:and|-|–|to|~)\s*(?:tick\s*)?$|^\s*(?:到|至|-|~)\s*$")
_WINDOW_ZH_END = _c(r"^\s*(?:之间|以内|内)")


def _windowed(c: Candidates, judged: Judged) -> Judged:
    """Two times that bound a window: a hold at the first and a deadline at the second."""
    out = list(judged)
    times = [i for i, (m, _) in enumerate(out) if isinstance(m, TimeMention)]
    for i, k in itertools.pairwise(times):
        a, b = out[i][0], out[k][0]
        if not _WINDOW_MID.search(c.text[a.end : b.start]):
            continue
        left, right = _clause_bounds(c.text, a.start, a.end)
        if _ROBOT_STATE.search(c.text, left, right) and any(
            left <= r.start < right for r in c.robots
        ):
            continue  # a robot's own window ("robot 9 is offline between 3000 and 3100")
        pre = c.text[max(0, a.start - 40) : a.start]
        if _WINDOW_PRE.search(pre) or _WINDOW_ZH_END.search(c.text[b.end :]):
            out[i] = (a, Judgement("hold", True))
            out[k] = (b, Judgement("deadline", True))
    return out


def scoped(c: Candidates, judged: Judged) -> Judged:
    """Judgements after self-repairs, other orders, declined requests and conditions.

    A constraint in a clause about another order, or one asked for and then declined, is no
    constraint; one under a condition is in doubt (the note goes to review).
    """
    out: Judged = []
    for m, j in _repaired(c, _changed(c, _windowed(c, judged))):
        if j.kind is not None and _out_of_scope(c, m):
            j = Judgement(None, True)
        elif j.kind is not None:
            left, right = _clause_bounds(c.text, m.start, m.end)
            s_left, _ = _sentence(c.text, m.start)
            if _PREFERENCE.search(c.text, left, right):
                j = replace(j, doubt="a preference")
            elif _CONDITION.search(c.text, s_left, right):
                if isinstance(m, RobotMention) and _UNAVAILABLE.search(c.text, left, right):
                    # "If robot 3 is down, escalate": a contingency about the robot the note
                    # already asked for, no constraint of its own.
                    j = Judgement(None, True)
                else:
                    j = replace(j, doubt="a condition")
        out.append((m, j))
    return out
