"""Instance logs: the Slurm backend's tail of a job's output file (read from the end, UTF-8 with bad bytes
replaced), the API (tail bounds, owners only, JSON or text/plain), the instance page's panel that follows it, and
`gpucloud logs --follow`."""

from argparse import Namespace

import pytest
from django.urls import reverse

from cli.instances import logs as cli_logs
from instances.backends import TransientBackendError
from instances.backends.slurm import SlurmBackend, log_name, tail_file
from instances.logs import as_lines
from instances.models import Instance
from instances.tests.fixtures import settle

API = "/api/v1/instances"


# Reading a file from its end ---------------------------------------------------------------------------------------


def test_the_tail_of_a_large_file_is_its_last_lines(tmp_path):
    path = tmp_path / "job.log"
    path.write_bytes(b"".join(b"line %d\n" % n for n in range(200_000)))
    assert tail_file(path, 3) == "line 199997\nline 199998\nline 199999"
    assert tail_file(path, 1, block=7) == "line 199999"  # blocks smaller than a line
    assert tail_file(path, 5000).split("\n")[0] == "line 195000"


def test_a_short_file_an_empty_file_and_a_last_line_without_its_end(tmp_path):
    path = tmp_path / "job.log"
    path.write_bytes(b"")
    assert tail_file(path, 10) == ""
    path.write_bytes(b"one\ntwo\nthree")
    assert tail_file(path, 10) == "one\ntwo\nthree" and tail_file(path, 2) == "two\nthree"


def test_chinese_output_reads_back_and_bytes_that_are_not_utf8_are_replaced(tmp_path):
    path = tmp_path / "job.log"
    path.write_bytes("训练开始\n".encode() + b"bad \xff\xfe bytes\n" + "损失 0.73\n".encode())
    assert tail_file(path, 3) == "训练开始\nbad \ufffd\ufffd bytes\n损失 0.73"
    # A block boundary inside a character only cuts the partial first line, which is dropped.
    assert tail_file(path, 1, block=4) == "损失 0.73"


def test_a_line_longer_than_the_read_limit_is_cut_at_its_start(tmp_path):
    path = tmp_path / "job.log"
    path.write_bytes(b"x" * 10_000 + b"\nend\n")
    assert tail_file(path, 5, max_bytes=100) == "x" * 95 + "\nend"


def test_lines_are_shown_as_a_terminal_leaves_them():
    text = "\x1b[32mgreen\x1b[0m\r\nepoch 1:  10%\repoch 1: 100%\r\n\x1b]0;title\x07plain\n"
    assert as_lines(text, 10) == ["green", "epoch 1: 100%", "plain"]
    assert as_lines("a\nb\nc\n", 2) == ["b", "c"] and as_lines("", 5) == []


# The Slurm backend -------------------------------------------------------------------------------------------------


@pytest.fixture
def slurm_instance(launch, settings, tmp_path):
    """A running instance of the Slurm backend (the console never asks the cluster here) with job 42's log file."""
    settings.SLURM = {**settings.SLURM, "root": str(tmp_path)}
    instance = launch(start_command="python train.py")
    settle()
    Instance.objects.filter(pk=instance.pk).update(backend_name="slurm", backend_job_id="42")
    instance.refresh_from_db()
    backend = SlurmBackend()
    folder = backend.log_folder(backend.config(instance))
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / log_name(instance.public_id, "42")
    log.write_bytes(
        "第 1 步：损失 2.31\n".encode() + b"step 2 \xff\n" + b"".join(b"step %d\n" % n for n in range(3, 301))
    )
    instance.log_path = log
    return instance


@pytest.mark.django_db
def test_the_slurm_backend_reads_the_current_jobs_output_file(slurm_instance, tmp_path):
    backend = SlurmBackend()
    assert backend.logs(slurm_instance, tail=2) == "step 299\nstep 300"
    Instance.objects.filter(pk=slurm_instance.pk).update(backend_job_id="")
    slurm_instance.refresh_from_db()
    assert backend.log_file(slurm_instance) == slurm_instance.log_path  # before the job id is known: the newest
    slurm_instance.log_path.unlink()
    assert backend.logs(slurm_instance) == ""  # no file yet: no logs


# The API -----------------------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_api_gives_the_last_lines_oldest_first(owner_api, slurm_instance):
    response = owner_api.get(f"{API}/{slurm_instance.public_id}/logs", {"tail": 3})
    assert response.status_code == 200
    assert response.json() == {"lines": ["step 298", "step 299", "step 300"], "simulated": False, "live": True}
    lines = owner_api.get(f"{API}/{slurm_instance.public_id}/logs").json()["lines"]
    assert len(lines) == 200 and lines[-1] == "step 300"
    first = owner_api.get(f"{API}/{slurm_instance.public_id}/logs", {"tail": 5000}).json()["lines"][:2]
    assert first == ["第 1 步：损失 2.31", "step 2 \ufffd"]


@pytest.mark.django_db
def test_the_api_gives_plain_text_to_a_client_that_asks_for_it(owner_api, slurm_instance):
    response = owner_api.get(f"{API}/{slurm_instance.public_id}/logs?tail=5000", HTTP_ACCEPT="text/plain")
    assert response.status_code == 200 and response["Content-Type"] == "text/plain; charset=utf-8"
    assert response.content.decode().startswith("第 1 步：损失 2.31\nstep 2 \ufffd\n")
    missing = owner_api.get(f"{API}/00000000-0000-4000-8000-000000000000/logs", HTTP_ACCEPT="text/plain")
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"  # errors stay JSON


@pytest.mark.django_db
@pytest.mark.parametrize("tail", ["0", "5001", "-1", "ten", "1.5"])
def test_a_tail_out_of_bounds_is_a_400_naming_it(owner_api, slurm_instance, tail):
    response = owner_api.get(f"{API}/{slurm_instance.public_id}/logs", {"tail": tail}, HTTP_ACCEPT_LANGUAGE="en")
    assert response.status_code == 400 and "tail" in response.json()["errors"]


@pytest.mark.django_db
def test_only_the_owner_reads_the_logs(slurm_instance, stranger_api, teammate_api, anon_api):
    url = f"{API}/{slurm_instance.public_id}/logs"
    assert stranger_api.get(url).status_code == 404 and teammate_api.get(url).status_code == 404
    assert b"step" not in stranger_api.get(url).content
    assert anon_api.get(url).status_code == 401


@pytest.mark.django_db
def test_the_simulated_backend_has_no_logs_and_says_so(owner_api, launch):
    instance = launch()
    response = owner_api.get(f"{API}/{instance.public_id}/logs")
    assert response.json() == {"lines": [], "simulated": True, "live": True}


@pytest.mark.django_db
def test_a_log_that_cannot_be_read_now_is_a_503(owner_api, slurm_instance, monkeypatch):
    def unreadable(self, instance, *, tail=200):
        raise TransientBackendError("the shared file system is not mounted")

    monkeypatch.setattr(SlurmBackend, "logs", unreadable)
    response = owner_api.get(f"{API}/{slurm_instance.public_id}/logs", HTTP_ACCEPT_LANGUAGE="en")
    assert response.status_code == 503 and response.json()["code"] == "logs_unavailable"
    assert "not mounted" not in response.json()["message"]  # the operator's detail goes to the log, not the user


# The page ---------------------------------------------------------------------------------------------------------


@pytest.fixture
def english(owner_client, settings):
    owner_client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    return owner_client


@pytest.mark.django_db
def test_the_page_shows_the_tail_and_follows_it_while_the_instance_is_live(english, slurm_instance):
    html = english.get(slurm_instance.get_absolute_url()).content.decode()
    panel = html[html.index('id="instance-logs"') :]
    assert 'hx-preserve="true"' in panel[:200] and "第 1 步：损失 2.31" not in panel  # the page shows the last 200
    assert "step 300\n</pre>" in panel and "step 101\n" in panel and "step 100\n" not in panel
    logs_url = reverse("instances:logs", args=[slurm_instance.public_id])
    assert f'hx-get="{logs_url}" hx-trigger="every 2s"' in panel
    assert "instances/logs.js" in html

    polled = english.get(logs_url, HTTP_HX_REQUEST="true")
    assert polled.status_code == 200 and "step 300" in polled.content.decode()


@pytest.mark.django_db
def test_polling_stops_once_the_instance_is_no_longer_live(english, slurm_instance):
    Instance.objects.filter(pk=slurm_instance.pk).update(status="stopped")
    logs_url = reverse("instances:logs", args=[slurm_instance.public_id])
    polled = english.get(logs_url, HTTP_HX_REQUEST="true")
    assert polled.status_code == 286 and "step 300" in polled.content.decode()  # htmx's "stop polling"
    html = english.get(slurm_instance.get_absolute_url()).content.decode()
    assert "step 300" in html and 'hx-trigger="every 2s"' not in html[html.index('id="instance-logs"') :][:600]


@pytest.mark.django_db
def test_a_status_poll_keeps_the_panel_and_a_status_change_sends_it_anew(english, slurm_instance):
    url = slurm_instance.get_absolute_url()
    same = english.get(url, {"seen": "running"}, HTTP_HX_REQUEST="true").content.decode()
    assert '<section id="instance-logs" hx-preserve="true"></section>' in same and "step 300" not in same
    changed = english.get(url, {"seen": "starting"}, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="instance-logs" aria-labelledby="logs-title" hx-swap-oob="true"' in changed and "step 300" in changed


@pytest.mark.django_db
def test_the_simulated_page_says_there_are_no_logs_because_there_is_no_machine(english, launch):
    instance = launch()
    html = english.get(instance.get_absolute_url()).content.decode()
    panel = html[html.index('id="instance-logs"') :][:1200]
    assert "there are no logs, because there is no machine" in panel and "simulated" in panel
    assert "hx-trigger" not in panel


@pytest.mark.django_db
def test_the_page_panel_answers_only_the_owner(slurm_instance, client, stranger):
    client.force_login(stranger)
    assert client.get(reverse("instances:logs", args=[slurm_instance.public_id])).status_code == 404


@pytest.mark.django_db
def test_the_page_shows_the_start_command_and_variables(english, launch):
    instance = launch(start_command="python train.py --lr 0.1", env={"EPOCHS": "3"})
    html = english.get(instance.get_absolute_url()).content.decode()
    assert "<code>python train.py --lr 0.1</code>" in html and "EPOCHS=3" in html


# The CLI -----------------------------------------------------------------------------------------------------------


class FakeApi:
    """Successive answers of GET instances/<id>/logs."""

    def __init__(self, *bodies):
        self.bodies = list(bodies)
        self.asked = []

    def get(self, path, **params):
        self.asked.append((path, params))
        return self.bodies.pop(0)


def test_logs_follow_prints_each_new_line_once_until_the_instance_stops(capsys):
    api = FakeApi(
        {"lines": ["a", "b"], "simulated": False, "live": True},
        {"lines": ["a", "b", "c"], "simulated": False, "live": True},
        {"lines": ["b", "c", "d", "训练完成"], "simulated": False, "live": False},
    )
    cli_logs(api, Namespace(id="x", tail=200, follow=True), sleep=lambda seconds: None)
    assert capsys.readouterr().out == "a\nb\nc\nd\n训练完成\n"
    assert api.asked[0] == ("instances/x/logs", {"tail": 200})


def test_logs_of_a_simulated_instance_say_there_is_no_machine(capsys):
    cli_logs(FakeApi({"lines": [], "simulated": True, "live": True}), Namespace(id="x", tail=5, follow=True))
    assert "no machine" in capsys.readouterr().out
