"""The twin against the real rware on the states a trained policy reaches (CI runs this).

Random actions almost never deliver on rware's own layouts, so the random-action comparisons
of ``test_rware_twin.py`` barely exercise deliveries and the request queue's refills. Here a
trained MAPPO's greedy actions (recorded on the real rware, ``tests/data/rware/README.md``)
replay on both side by side: observations, rewards, the hidden state (robot cells, headings,
carried shelves, shelf cells, the request queue in order) after every step.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fleetmind.testing.rware_twin import compare_with_rware

DATA = Path(__file__).resolve().parents[1] / "data" / "rware"


@pytest.mark.parametrize("name", ["mappo-tiny-2ag-v2.json"])
def test_twin_follows_rware_on_a_trained_policys_trajectory(name: str) -> None:
    pytest.importorskip("rware")
    rec = json.loads((DATA / name).read_text())
    actions = np.asarray(rec["actions"], dtype=np.int64)
    out = compare_with_rware(rec["env_id"], steps=len(actions), seed=rec["seed"], actions=actions)
    assert out.first_mismatch is None
    assert out.mismatches == 0
    # The recording delivers (what random actions do not): each delivery refills the queue.
    assert out.reward_total == rec["deliveries"]
    assert out.reward_total >= 20
    assert out.episodes == rec["episodes"]
