"""Numbers in the Markdown and HTML reports, written the way each report language writes them. One formatter per
language; report/document.py writes every number it formats through it.

- English keeps Python's grouping: "12,345.6", "10%", "$12,345", "12,345 EUR".
- French follows the French typographic rules (Imprimerie nationale, Lexique des règles typographiques; the same
  as the Unicode CLDR "fr" locale): a decimal comma; a narrow no-break space (U+202F) between groups of
  thousands and before "%"; the currency after the amount, after a no-break space (U+00A0), as a symbol where
  French has one: "12 345,6", "12,5 %", "12 345 €", "12 345 $US".

Strings that come from the core (reasons, notes, FAQ answers) are English and already formatted: they are left
as they are (the French footer says so).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuplan.report.i18n import check_lang

#: narrow no-break space: French thousands separator and the space before "%"
NNBSP = "\u202f"
#: no-break space: between a French amount and its currency
NBSP = "\u00a0"
#: how French writes a currency after an amount; any other code stays as is (ISO 4217)
FR_CURRENCY = {"EUR": "€", "USD": "$US", "GBP": "£"}
#: a number as English `{:,.Nf}` writes it, standing alone (not part of a word such as "1B" or "x2")
_EN_NUMBER = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w])")


@dataclass(frozen=True)
class Numbers:
    lang: str

    def num(self, x: float, decimals: int = 0) -> str:
        """x rounded to `decimals` places, thousands grouped."""
        text = f"{x:,.{decimals}f}"
        if self.lang == "fr":
            text = text.replace(",", NNBSP).replace(".", ",")
        return text

    def sig(self, x: float, digits: int = 3) -> str:
        """x to `digits` significant digits (a ranking score: 0.000123, 1.24, 12.3), in the language's notation."""
        text = f"{x:.{digits}g}"
        return text.replace(".", ",") if self.lang == "fr" else text

    def pct(self, fraction: float, decimals: int = 0) -> str:
        """A fraction as a percentage: 0.125 -> "12.5%" (en), "12,5 %" (fr)."""
        text = f"{fraction:.{decimals}%}"
        if self.lang == "fr":
            text = text[:-1].replace(".", ",") + NNBSP + "%"
        return text

    def money(self, amount: float, currency: str, digits: int = 0) -> str:
        """An amount rounded to `digits` and its currency code: "12,345 EUR" (en), "12 345 €" (fr)."""
        if self.lang == "fr":
            return f"{self.num(amount, digits)}{NBSP}{FR_CURRENCY.get(currency, currency)}"
        return f"{amount:,.{digits}f} {currency}"

    def usd(self, amount: float) -> str:
        """A rounded amount in US dollars, as prices are written: "$12,345" (en), "12 345 $US" (fr)."""
        return self.money(amount, "USD") if self.lang == "fr" else f"${amount:,.0f}"

    def localize(self, text: str) -> str:
        """The numbers in a short text that report/common.py's helpers wrote in English style ("1,234.5 h",
        "23.0 s/req"), written in this language's style. Only for those helpers' output, never for reasons."""
        if self.lang == "en":
            return text
        return _EN_NUMBER.sub(lambda m: m.group(1).replace(",", NNBSP) + (m.group(2) or "").replace(".", ","), text)


def numbers(lang: str) -> Numbers:
    """The number formatter of report language `lang` ("en" or "fr")."""
    return Numbers(check_lang(lang))


__all__ = ["FR_CURRENCY", "NBSP", "NNBSP", "Numbers", "numbers"]
