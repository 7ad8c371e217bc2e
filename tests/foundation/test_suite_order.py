"""The suite's own schedule (tests/conftest.py, scripts/test.sh): the modules with the most
``slow`` tests are handed out first, each module's tests stay together and in their order."""

from __future__ import annotations

import re
from pathlib import Path

import conftest

ROOT = Path(__file__).resolve().parents[2]


class _Item:
    def __init__(self, nodeid: str, slow: bool = False):
        self.nodeid, self._slow = nodeid, slow

    def get_closest_marker(self, name: str):
        return object() if name == "slow" and self._slow else None


def test_modules_with_more_slow_tests_come_first_and_stay_whole():
    items = [_Item("a.py::t1"), _Item("a.py::t2"), _Item("b.py::t1", slow=True),
             _Item("b.py::t2"), _Item("c.py::t1", slow=True), _Item("c.py::T::t2", slow=True),
             _Item("d.py::t1")]
    conftest.pytest_collection_modifyitems(None, items)
    assert [i.nodeid for i in items] == ["c.py::t1", "c.py::T::t2", "b.py::t1", "b.py::t2",
                                         "a.py::t1", "a.py::t2", "d.py::t1"]


def test_the_test_command_hands_out_modules_in_that_order():
    """``--dist loadscope`` sends whole modules (the order above is the order they go out in
    only without xdist's own reordering by test count)."""
    text = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    cmd = re.search(r"pytest -n \"\$workers\" (.*)", text).group(1)
    assert "--dist loadscope" in cmd and "--no-loadscope-reorder" in cmd
