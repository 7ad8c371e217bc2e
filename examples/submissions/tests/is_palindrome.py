"""Test of the example problem is_palindrome: does a string read the same backwards, ignoring case?"""

ENTRY_POINT = "is_palindrome"


def check(candidate):
    assert candidate("level") == True
    assert candidate("Level") == True
    assert candidate("abc") == False
    assert candidate("") == True
