"""The report's number formatter (report/numbers.py): English as Python's `{:,}` writes it, French with a decimal
comma, a narrow no-break space (U+202F) between thousands and before "%", and the currency after a no-break space
(U+00A0)."""

from __future__ import annotations

import pytest

from gpuplan.errors import InputError
from gpuplan.report.numbers import NBSP, NNBSP, numbers

EN, FR = numbers("en"), numbers("fr")


def test_the_spaces_are_the_no_break_ones() -> None:
    assert NNBSP == "\u202f" and NBSP == "\u00a0"


@pytest.mark.parametrize(("x", "decimals", "en", "fr"), [
    (0, 0, "0", "0"),
    (12.5, 1, "12.5", "12,5"),
    (999.96, 1, "1,000.0", "1\u202f000,0"),
    (12345, 0, "12,345", "12\u202f345"),
    (1234567.891, 2, "1,234,567.89", "1\u202f234\u202f567,89"),
    (-3456.5, 1, "-3,456.5", "-3\u202f456,5"),
])
def test_num(x: float, decimals: int, en: str, fr: str) -> None:
    assert EN.num(x, decimals) == en
    assert FR.num(x, decimals) == fr


@pytest.mark.parametrize(("fraction", "decimals", "en", "fr"), [
    (0.10, 0, "10%", "10\u202f%"),
    (0.125, 1, "12.5%", "12,5\u202f%"),
    (0.0, 0, "0%", "0\u202f%"),
    (12.5, 0, "1250%", "1250\u202f%"),
])
def test_pct(fraction: float, decimals: int, en: str, fr: str) -> None:
    assert EN.pct(fraction, decimals) == en
    assert FR.pct(fraction, decimals) == fr


def test_money() -> None:
    assert EN.money(12345.4, "EUR") == "12,345 EUR"
    assert EN.money(12345.4, "USD") == "12,345 USD"
    assert EN.usd(205870) == "$205,870"
    assert FR.money(12345.4, "EUR") == "12\u202f345\u00a0€"
    assert FR.money(12345.4, "USD") == "12\u202f345\u00a0$US"
    assert FR.money(12345.4, "GBP") == "12\u202f345\u00a0£"
    assert FR.money(12345.4, "CHF") == "12\u202f345\u00a0CHF"
    assert FR.usd(205870) == "205\u202f870\u00a0$US"


@pytest.mark.parametrize(("text", "fr"), [
    ("23.0 s/req", "23,0 s/req"),
    ("1,234.5 h", "1\u202f234,5 h"),
    ("45 min", "45 min"),
    ("12.3 j /1B tok", "12,3 j /1B tok"),  # "1B" is a word, not a number
    ("tp=4 x2 replicas, batch 32", "tp=4 x2 replicas, batch 32"),
])
def test_localize_rewrites_the_english_helpers_numbers(text: str, fr: str) -> None:
    assert EN.localize(text) == text
    assert FR.localize(text) == fr


def test_unknown_language() -> None:
    with pytest.raises(InputError):
        numbers("de")
