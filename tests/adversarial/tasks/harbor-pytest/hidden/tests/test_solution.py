import sys

sys.path.insert(0, "/app")


def test_answer():
    import solution

    assert solution.answer() == 1060
