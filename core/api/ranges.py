"""Regular expressions for amounts in a range, for an OpenAPI ``pattern``: a money amount travels as text
(``"49.90"``), and JSON Schema bounds only numbers, so the range a string amount must fall in is stated as the
pattern of the texts that spell it."""

from decimal import Decimal


def integers(low: int, high: int) -> str:
    """A regular expression (unanchored) for the whole numbers ``low``..``high`` written without leading zeros."""
    alternatives = []
    while low <= high:
        top = min(high, 10 ** len(str(low)) - 1)
        alternatives.append(_same_length(str(low), str(top)))
        low = top + 1
    return alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"


def _same_length(low: str, high: str) -> str:
    if low == high:
        return low
    rest = len(low) - 1
    if set(low[1:]) <= {"0"} and set(high[1:]) <= {"9"}:  # every tail: one class of first digits
        first = low[0] if low[0] == high[0] else f"[{low[0]}-{high[0]}]"
        return first + (f"[0-9]{{{rest}}}" if rest else "")
    if low[0] == high[0]:
        return low[0] + _same_length(low[1:], high[1:])
    parts = [low[0] + _same_length(low[1:], "9" * rest)]
    if int(low[0]) + 1 <= int(high[0]) - 1:
        first, last = int(low[0]) + 1, int(high[0]) - 1
        parts.append((str(first) if first == last else f"[{first}-{last}]") + f"[0-9]{{{rest}}}")
    parts.append(high[0] + _same_length("0" * rest, high[1:]))
    return "(?:" + "|".join(parts) + ")"


def amounts(low: Decimal, high: Decimal | None = None, places: int = 2, whole_digits: int = 10) -> str:
    """An anchored pattern for the amounts from ``low`` to ``high`` (whole numbers of yuan; no ``high``: up to
    ``whole_digits`` digits), with at most ``places`` decimals: ``50``, ``49.9``, ``49.90``."""
    fraction = rf"(?:\.[0-9]{{1,{places}}})?"
    if high is None and int(low) in (0, 1):
        whole = rf"[1-9][0-9]{{0,{whole_digits - 1}}}"
        return "^(?:" + ("0|" if int(low) == 0 else "") + whole + ")" + fraction + "$"
    low, high = int(low), int(high if high is not None else 10**whole_digits - 1)
    below = integers(low, high - 1) + fraction if low < high else None
    at_top = rf"{high}(?:\.0{{1,{places}}})?"
    return "^(?:" + (f"{below}|" if below else "") + at_top + ")$"


def positive_numbers(high: Decimal, places: int | None = None) -> str:
    """An anchored pattern for the numbers above zero up to ``high`` (a whole number), with any decimals (or at
    most ``places``): ``7``, ``0.5``, ``.5``, ``13.25``."""
    high = int(high)
    if places is None:
        below_one, fraction = r"[0-9]*[1-9][0-9]*", r"(?:\.[0-9]+)?"
        zeros = r"(?:\.0+)?"
    else:  # a first non-zero decimal after k zeros, then what places are left
        below_one = "(?:" + "|".join(f"{'0' * k}[1-9][0-9]{{0,{places - 1 - k}}}" for k in range(places)) + ")"
        fraction, zeros = rf"(?:\.[0-9]{{1,{places}}})?", rf"(?:\.0{{1,{places}}})?"
    parts = [rf"0?\.{below_one}"]
    if high > 1:
        parts.append(integers(1, high - 1) + fraction)
    parts.append(f"{high}{zeros}")
    return "^(?:" + "|".join(parts) + ")$"
