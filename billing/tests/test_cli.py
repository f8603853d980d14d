"""`gpucloud balance` and `gpucloud topup AMOUNT` against a real HTTP server."""

import pytest

from accounts import services
from billing import wallet
from cli.main import main

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cli(live_server, tmp_path, monkeypatch, capsys, owner):
    monkeypatch.setenv("GPUCLOUD_CONFIG", str(tmp_path / "config.json"))
    token = services.create_api_token(owner, name="cli", scope="read_write").plaintext

    def run(*argv):
        code = main(["--url", live_server.url, "--token", token, "--lang", "en", *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_balance_shows_cash_and_the_trial_credit_with_its_expiry(cli, owner):
    wallet.grant_trial_credit(owner, owner.email)
    code, out, _ = cli("balance")
    assert code == 0 and "Balance for compute: ¥10.00" in out and "trial: ¥10.00 (expires" in out


def test_topup_prints_the_checkout_url_and_bad_amounts_are_clear_errors(cli):
    code, out, _ = cli("topup", "50")
    assert code == 0 and "/billing/topup/sandbox/" in out and "no real money" in out
    code, _, err = cli("topup", "abc")
    assert code == 1 and "400" in err
