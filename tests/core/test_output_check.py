"""The `[file.check]` rules on a run's output: expect, reject, result captures against the
baseline's; every message names the rule and shows the offending line."""

from __future__ import annotations

import pickle

import pytest

from annotune.core.output_check import LINE_CHARS, MAX_CAPTURES, OutputCheck


def test_expect_and_reject_say_which_rule_failed_and_show_the_line():
    rules = OutputCheck(expect=r"^PASS$", reject=r"FAIL|error")
    assert rules.judge("sum = 3\nPASS\n") == ("", None)
    wrong, _ = rules.judge("sum = 3\nfailed\n")
    assert wrong == "expect '^PASS$': nothing in the output matches (its last line: 'failed')"
    wrong, _ = rules.judge("PASS\nsomething\nan error: x = 3 \nmore\n")
    assert wrong == "reject 'FAIL|error' matches line 'an error: x = 3'"
    assert "it printed nothing" in rules.judge("")[0]


def test_an_offending_line_is_cut():
    wrong, _ = OutputCheck(reject="FAIL").judge("FAIL " + "x" * 1000)
    assert len(wrong) < LINE_CHARS + 60 and wrong.endswith("...'")


def test_result_captures_every_group_of_every_match():
    rules = OutputCheck(result=r"(\w+) = (\S+)")
    assert rules.judge("a = 1\nb = 2.5\n") == ("", ("a", "1", "b", "2.5"))
    whole = OutputCheck(result=r"[0-9]+\.[0-9]+")
    assert whole.judge("x 1.5 y 2.25") == ("", ("1.5", "2.25"))
    wrong, captures = rules.judge("nothing here\n")
    assert captures is None and "result '(\\w+) = (\\S+)': nothing in the output matches" in wrong


def test_result_numbers_within_rtol_text_exactly_and_counts_must_agree():
    exact = OutputCheck(result=r"= (\S+)")
    assert exact.compare(("1.0", "ok"), ("1", "ok")) == ""  # the same number, written otherwise
    assert "capture 1 is '1.0000001', the baseline's '1.0'" in exact.compare(
        ("1.0000001",), ("1.0",)
    )
    assert "capture 1 is 'ko'" in exact.compare(("ko",), ("ok",))
    assert (
        exact.compare(("1", "2"), ("1",)) == "result '= (\\S+)' captured 2 value(s), the baseline 1"
    )
    loose = OutputCheck(result=r"= (\S+)", rtol=1e-6)
    assert loose.compare(("1.0000001",), ("1.0",)) == ""
    assert "(rtol 1e-06)" in loose.compare(("1.01",), ("1.0",))
    assert exact.compare(("nan",), ("nan",)) == ""  # not a finite number: compared as text


def test_too_many_captures_is_a_failure_not_memory():
    wrong, captures = OutputCheck(result=r"(\d)").judge("1" * (MAX_CAPTURES + 1))
    assert captures is None and "more than" in wrong and "narrow" in wrong


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"expect": "PA(SS"}, "invalid expect regex"),
        ({"expect": "PASS", "rtol": -1.0}, "rtol"),
        ({"expect": "PASS", "rtol": float("nan")}, "rtol"),
        ({}, "needs expect, reject or result"),
    ],
)
def test_bad_rules_are_refused(given, message):
    with pytest.raises(ValueError, match=message):
        OutputCheck(**given)


def test_the_rules_are_a_study_key_and_travel_to_a_device_process():
    rules = OutputCheck(expect="PASS", result=r"sum = (\S+)", rtol=1e-9)
    assert rules.to_json() == {"expect": "PASS", "result": r"sum = (\S+)", "rtol": 1e-9}
    assert OutputCheck(expect="PASS").to_json() == {"expect": "PASS"}
    again = pickle.loads(pickle.dumps(rules))
    assert again == rules and again.judge("sum = 3\nPASS") == ("", ("3",))
