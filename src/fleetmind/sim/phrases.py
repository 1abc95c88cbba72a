"""The hand-written phrasings of the note writer, English and Chinese (data, no logic).

Slots in braces are filled by :class:`fleetmind.sim.notewriter.NoteWriter`: ``{robot}``, ``{tick}``,
``{n}`` (a count of ticks) and the like. Kept apart from the writer so the writer reads top to
bottom and the tables can grow without burying it.
"""

from __future__ import annotations

from fleetmind.sim.notes import ConstraintKind, Lang

_TEMPLATE_FILLERS = (
    "standard restock",
    "customer asked for tracking",
    "regular weekly order",
    "pack with the usual care",
    "",
)

_EN_PHRASES: dict[ConstraintKind, tuple[str, ...]] = {
    "only_robot": (
        "fragile: only {r} has the soft gripper",
        "only {r} may take this one",
        "{r} only",
        "must go on {r}",
        "assign to {r}, nobody else",
        "send {r} for this, it has the right tray",
        "reserved for {r}",
        "{r} has the cold box, use it and no other robot",
        "nobody but {r} should carry this",
        "heavy pallet, {r} is the only one rated for it",
        "give this to {r} and only {r}",
        "exclusively {r} please",
        "this one is for {r}, no one else touches it",
        "customer insists on {r}, don't swap it",
    ),
    "not_robot": (
        "not {r}, its gripper is broken",
        "do not use {r}",
        "anyone but {r}",
        "{r} is off limits for this order",
        "keep {r} away from this one",
        "{r} can't take it, sensor fault",
        "any robot except {r}",
        "don't send {r}",
        "never {r} (it scratched the last one)",
        "avoid {r} for this order",
        "no {r} please",
        "{r} must not carry this",
        "skip {r}, it is due for maintenance",
        "{r} dropped the last box, someone else take it",
    ),
    "deadline": (
        "deliver before {dt}",
        "VIP customer, has to arrive before {dt}",
        "must be at the station before {dt}",
        "hard deadline: {dt}",
        "{dt} is the cutoff, get it there before then",
        "no later than {dti}, please",
        "customer is waiting, drop off before {dt}",
        "late after {dti} means a refund",
        "get this one out before {dt} or we miss the truck",
        "has to be delivered by {dti}",
        "rush: before {dt}",
        "before tick {dn} please",
        "the delivery tick must be under {dn}",
        "must reach the station before tick {dn}",
        "deliver within {dk} ticks",
        "has to be there in the next {dk} ticks",
        "customer needs it inside {dk} ticks",
        "drop off within {dk} ticks of arrival",
        "you have {dk} ticks to get it to the station",
        "less than {dk} ticks from now, please",
        "urgent, deliver in under {dk} ticks",
        "should be at the station within the next {dk} ticks",
        "{dk} ticks tops, it's urgent",
        "rush order: {dk} ticks from arrival to drop-off",
    ),
    "hold": (
        "hold until the truck arrives at {ht}",
        "do not pick up before {ht}",
        "not ready until {ht}",
        "wait until {ht} before loading",
        "shelf is being restocked, pickup from {ht} on",
        "don't touch it before {ht}",
        "on hold till tick {hn}",
        "pickup not before tick {hn}",
        "released at {ht}, leave it until then",
        "goods arrive at {ht}, no pickup earlier",
        "keep it on the shelf until {ht}",
        "can be collected from tick {hn}",
        "paint is still drying, earliest pickup {ht}",
        "hold for {hk} ticks",
        "don't pick up for the next {hk} ticks",
        "ready in {hk} ticks",
        "wait {hk} ticks before pickup",
        "{hk} ticks from now it can go, not earlier",
        "pickup no sooner than {hk} ticks from now",
        "still being packed, give it {hk} ticks",
        "leave it alone for {hk} ticks",
    ),
}

_ZH_PHRASES: dict[ConstraintKind, tuple[str, ...]] = {
    "only_robot": (
        "只能由{r}来送",
        "只让{r}送",
        "易碎品，只有{r}有软夹爪",
        "指定{r}",
        "这单给{r}，别的不行",
        "必须用{r}",
        "{r}专送",
        "除了{r}谁都不能碰",
        "只有{r}能搬这么重的",
        "请安排{r}，其他机器人不要接",
        "冷链货，只能{r}送",
        "仅限{r}",
    ),
    "not_robot": (
        "不要用{r}",
        "别派{r}",
        "{r}不行，夹爪坏了",
        "除了{r}都可以",
        "{r}不能送这单",
        "禁止{r}接这单",
        "{r}传感器有问题，换别的",
        "谁都行，就是不要{r}",
        "{r}别碰这个",
        "避开{r}",
        "{r}上次摔坏了东西，这次别用它",
    ),
    "deadline": (
        "请在{dt}之前送到",
        "{dt}前必须送达",
        "客户急用，{dn}之前送到",
        "最晚{dni}送到",
        "不晚于{dti}送达",
        "截止{dt}，过了就不要了",
        "务必在{dt}以前送到工位",
        "加急！{dt}前到",
        "要在第{dn}个时刻前送到",
        "{dt}之前送不到就麻烦了",
        "赶{dt}的车，之前必须送到",
        "时刻{dn}之前完成配送",
        "{dk}个时刻内送到",
        "请在{dk}个时刻之内送达",
        "加急，{dk}个tick内到",
        "从现在起{dk}个时刻内必须送到",
        "{dk}个时刻以内送到工位",
        "限时{dk}个时刻",
        "只给{dk}个时刻，尽快送到",
        "{dk}个时刻之内要到",
    ),
    "hold": (
        "{ht}之前不要取货",
        "{ht}以后才能取",
        "等到{ht}再取",
        "货还没到，{ht}之后再来取",
        "先别动，{ht}之后再取",
        "{hn}之前别取",
        "暂缓取货，至少等到{ht}",
        "卡车{ht}到，之前不能取",
        "从{ht}开始可以取货",
        "第{hn}个时刻以前请勿取货",
        "还在打包，{ht}才能取",
        "{hk}个时刻后才能取",
        "等{hk}个时刻再取",
        "{hk}个时刻之内不要取货",
        "先放{hk}个时刻",
        "过{hk}个tick再来取",
        "现在别取，{hk}个时刻以后再说",
        "还要{hk}个时刻才能好",
    ),
}

_PHRASES: dict[Lang, dict[ConstraintKind, tuple[str, ...]]] = {"en": _EN_PHRASES, "zh": _ZH_PHRASES}

# Two facts: keys are sorted kind pairs. A hold with a deadline gives the deadline absolute.
_Pair = tuple[ConstraintKind, ConstraintKind]
_PAIRS: tuple[_Pair, ...] = (
    ("hold", "only_robot"),
    ("hold", "not_robot"),
    ("deadline", "only_robot"),
    ("deadline", "not_robot"),
    ("deadline", "hold"),
)

_PAIR_PHRASES: dict[Lang, dict[_Pair, tuple[str, ...]]] = {
    "en": {
        ("hold", "only_robot"): (
            "hold until {ht}, then only {r} may take it",
            "{r} only, and not before {ht}",
            "wait {hk} ticks, then send {r} (no other robot)",
            "reserved for {r}; pickup from tick {hn} on",
            "only {r} has the clamp for this, and it isn't ready for {hk} ticks",
        ),
        ("hold", "not_robot"): (
            "not {r}, and don't pick up before {ht}",
            "anyone except {r}, but not before {ht}",
            "hold {hk} ticks; {r} must not carry it",
            "keep {r} off this one and leave it on the shelf until {ht}",
        ),
        ("deadline", "only_robot"): (
            "only {r}, and before {dt}",
            "{r} has to deliver it before {dt}",
            "send {r} only, it must arrive within {dk} ticks",
            "rush for {r}: at the station before tick {dn}",
        ),
        ("deadline", "not_robot"): (
            "any robot but {r}, deliver before {dt}",
            "don't use {r}; the customer needs it within {dk} ticks",
            "before {dt}, and not on {r}",
            "{r} is broken, someone else get this there before {dt}",
        ),
        ("deadline", "hold"): (
            "not before {ht}, and delivered before {dt}",
            "delivery window: pick up from {ht}, deliver before {dt}",
            "wait {hk} ticks, but it must still arrive before {dt}",
            "hold until {ht}; hard deadline {dt}",
        ),
    },
    "zh": {
        ("hold", "only_robot"): (
            "{ht}之后才能取，而且只能{r}送",
            "只让{r}送，{ht}之前别取",
            "等{hk}个时刻再取，指定{r}",
        ),
        ("hold", "not_robot"): (
            "不要用{r}，{ht}之前也别取",
            "{hk}个时刻后再取，别派{r}",
            "{r}不行；等到{ht}再取",
        ),
        ("deadline", "only_robot"): (
            "只能{r}送，{dt}之前送到",
            "{r}专送，{dk}个时刻内到",
            "指定{r}，务必在{dt}前送达",
        ),
        ("deadline", "not_robot"): (
            "别用{r}，{dt}之前送到",
            "{dk}个时刻内送到，但不要派{r}",
            "除了{r}谁都行，{dt}前到",
        ),
        ("deadline", "hold"): (
            "{ht}之后才能取，{dt}之前必须送到",
            "等到{ht}再取，最晚{dni}送到",
            "先放{hk}个时刻，{dt}前送达",
        ),
    },
}

_CONNECTORS: dict[Lang, tuple[str, ...]] = {
    "en": (". ", "; ", ", ", " - ", ". also ", ", and ", " + ", " / "),
    "zh": ("，", "；", "。", "。另外，", "，还有", "，而且", " "),
}

_FILLERS: dict[Lang, tuple[str, ...]] = {
    "en": (
        *_TEMPLATE_FILLERS,
        "nothing special",
        "normal priority",
        "repeat order, same as last week",
        "gift wrap requested",
        "please double-check the label",
        "handle with care",
        "no notes",
        "n/a",
        "bulk order, usual process",
    ),
    "zh": (
        "常规补货",
        "普通订单",
        "每周例行订单",
        "请按常规包装",
        "客户要求提供物流跟踪",
        "轻拿轻放",
        "无特殊要求",
        "正常处理",
        "老客户，按老规矩",
        "补货单",
        "请核对标签",
        "礼品包装",
    ),
}

# Distractors mention robots, numbers or past ticks and constrain nothing. Slots: {r}, {r2} two
# different robots, {a} <= {b} small numbers, {big} an order number, {past} a tick before
# arrival. The safe ones may sit in a constrained note; the others (cancellations, "anyone can
# take it") would contradict a constraint, so they appear in plain notes only.
_SAFE_DISTRACTORS: dict[Lang, tuple[str, ...]] = {
    "en": (
        "{r} loaded the truck this morning",
        "box {a} of {b}",
        "{r} was fixed yesterday",
        "weighs {a} kg",
        "order #{big}, {a} items",
        "customer called at {past}",
        "label printed at {past}",
        "last time {r} did this one, no complaints",
        "{a} pallets on the dock, this is one of them",
        "ref {big}",
    ),
    "zh": (
        "{r}昨天修好了",
        "{r}早上装过车",
        "共{b}箱，这是第{a}箱",
        "重{a}公斤",
        "订单号{big}",
        "客户在{past}打过电话",
        "上次是{r}送的，客户很满意",
        "码头有{a}个托盘，这是其中一个",
        "标签是{past}打印的",
    ),
}
_PLAIN_DISTRACTORS: dict[Lang, tuple[str, ...]] = {
    "en": (
        "the fragile label is wrong, anyone can take it",
        "ignore the earlier hold, ship whenever",
        "the old deadline is cancelled, no rush",
        "any robot is fine, {r} included",
        "previous note said only {r}, that no longer applies",
        "{r} and {r2} are both fine for this",
        "no hold on this one",
        "the deadline was {past}, but it was dropped",
        "not urgent, {a} units",
        "not restricted to {r} anymore",
    ),
    "zh": (
        "易碎标签贴错了，谁送都行",
        "之前说的暂缓取货取消了，随时可以送",
        "原来的截止时间取消了，不急",
        "不限机器人，{r}也可以",
        "之前说只能{r}送，现在不用了",
        "{r}和{r2}都可以送",
        "没有时间要求",
        "不急，共{a}件",
        "{r}的限制已经取消",
    ),
}

_PREFIXES: dict[Lang, tuple[str, ...]] = {
    "en": (
        "pls ",
        "fyi: ",
        "note: ",
        "hi team, ",
        "dispatch: ",
        "re this order: ",
        "heads up - ",
        "from the front desk: ",
    ),
    "zh": ("注意：", "客户要求：", "备注：", "各位，", "提醒一下，", "前台留言："),
}
_SUFFIXES: dict[Lang, tuple[str, ...]] = {
    "en": (
        " thanks",
        " thx!",
        ", thanks!",
        " pls",
        " - Sam",
        " :)",
        "!!",
        ".",
        " (customer request)",
    ),
    "zh": ("，谢谢", "，辛苦了", "！", "。", "～", "，麻烦了", "（客户要求）"),
}

_EN_ROBOT_FORMS = (
    "robot {n}",
    "Robot{n}",
    "Robot {n}",
    "r{n}",
    "R{n}",
    "bot #{n}",
    "bot {n}",
    "robot #{n}",
    "robot-{n}",
    "robot {w}",
    "Robot {w}",
)
_ZH_ROBOT_FORMS = (
    "{n}号机器人",
    "{n}号车",
    "机器人{n}",
    "{z}号机器人",
    "{z}号车",
    "{n}号",
    "机器人{n}号",
    "r{n}",
    "{n}号小车",
    "{z}号",
)
_EN_TICK_FORMS = ("tick {v}", "t={v}", "T{v}", "t{v}", "tick #{v}", "T={v}", "t = {v}", "Tick {v}")
# {x}: the number in digits or Chinese numerals; {v}: digits.
_ZH_TICK_FORMS = ("t={v}", "T{v}", "tick {v}", "T={v}", "时刻{x}", "第{x}个时刻", "第{x}时刻")
