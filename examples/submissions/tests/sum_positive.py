"""Test of the example problem sum_positive: the sum of the positive numbers of a list."""

ENTRY_POINT = "sum_positive"


def check(candidate):
    assert candidate([1, 2, 3]) == 6
    assert candidate([-1, 2, -3, 4]) == 6
    assert candidate([]) == 0
    assert candidate([-5, -2]) == 0
