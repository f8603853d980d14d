"""What an instance boots with: the start command, variables and secrets a launch takes (wizard, API, one-click
clone), checked the same way everywhere; what the backends get at boot; and secret values that never leak."""

import shlex

import pytest
from django.urls import reverse

from core.field_errors import FieldError
from instances import secrets
from instances.backends.slurm import SlurmBackend
from instances.choices import Reason
from instances.environment import boot_environment, check_boot_options, parse_env_lines
from instances.models import Instance, InstanceEvent
from instances.tests.fixtures import settle

pytestmark = pytest.mark.django_db

VALUE = "hf_S3cr3t-VALUE-7f9c"
API = "/api/v1/instances"


@pytest.fixture
def hf_token(owner):
    secrets.put_secret(owner, "HF_TOKEN", VALUE)
    return "HF_TOKEN"


# The rule, once -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"start_command": "echo a\x00b"}, "start_command"),
        ({"start_command": "x" * 4097}, "start_command"),
        ({"start_command": "中" * 1366}, "start_command"),  # 4098 bytes of UTF-8
        ({"env": {"1BAD": "x"}}, "env"),
        ({"env": {"BAD-NAME": "x"}}, "env"),
        ({"env": {"HOME": "/tmp"}}, "env"),
        ({"env": {"PATH": "/evil"}}, "env"),
        ({"env": {"GPUCLOUD_INSTANCE": "x"}}, "env"),
        ({"env": {"JUPYTER_TOKEN": "x"}}, "env"),
        ({"env": {"ASCEND_RT_VISIBLE_DEVICES": "0-7"}}, "env"),
        ({"env": {"A": "x" * 4097}}, "env"),
        ({"env": {"A": "a\x00b"}}, "env"),
        ({"env": {"A": 1}}, "env"),
        ({"env": {f"V{i}": "x" for i in range(65)}}, "env"),
        ({"env": ["A=1"]}, "env"),
        ({"secret_names": ["NOT_MINE"]}, "secrets"),
        ({"secret_names": "HF_TOKEN"}, "secrets"),
        ({"secret_names": ["HF_TOKEN"], "env": {"HF_TOKEN": "plain"}}, "env"),
    ],
)
def test_bad_boot_options_are_refused_naming_the_field(owner, hf_token, options, field):
    with pytest.raises(FieldError) as refused:
        check_boot_options(owner, **options)
    assert refused.value.field == field


def test_good_boot_options_are_kept_as_given(owner, hf_token):
    boot = check_boot_options(
        owner,
        start_command="cd /root && \\\r\n  python train.py  ",
        env={"HF_ENDPOINT": "https://hf-mirror.com", "EMPTY": "", "QUOTED": "'a b' \"c\""},
        secret_names=[hf_token, hf_token],
    )
    assert boot.start_command == "cd /root && \\\n  python train.py  "  # CR LF → LF; nothing else touched
    assert boot.env["QUOTED"] == "'a b' \"c\"" and boot.env["EMPTY"] == ""
    assert boot.secret_names == ("HF_TOKEN",)
    assert check_boot_options(owner, start_command="  \n ").start_command == ""


def test_the_wizard_lines_become_variables_and_bad_lines_are_named():
    text = "# a comment\r\n\r\nHF_ENDPOINT=https://hf-mirror.com\nEQ=a=b\n  SPACED = kept as typed \n"
    assert parse_env_lines(text) == {"HF_ENDPOINT": "https://hf-mirror.com", "EQ": "a=b", "SPACED": " kept as typed "}
    for text, line in (("A=1\nno equals sign", "Line 2"), ("A=1\nA=2", "Line 2: A is given twice")):
        with pytest.raises(FieldError, match=line):
            parse_env_lines(text)


# Launching: the service, the API, the page, the clone -----------------------------------------------------------


def test_a_launch_keeps_its_boot_options_and_refuses_bad_ones_before_anything_is_reserved(launch, hf_token):
    instance = launch(start_command="python train.py", env={"EPOCHS": "3"}, secrets=[hf_token])
    assert (instance.start_command, instance.env, instance.secret_names) == (
        "python train.py",
        {"EPOCHS": "3"},
        ["HF_TOKEN"],
    )
    with pytest.raises(FieldError):
        launch(name="bad", env={"HOME": "/x"})
    assert Instance.objects.count() == 1


def test_the_api_launches_with_boot_options_and_shows_secret_names_only(owner_api, lifecycle, hf_token):
    body = {
        "name": "api-boot",
        "image": "pytorch-2.2-neuware",
        "chip": "mlu370-x8",
        "start_command": "python train.py",
        "env": {"EPOCHS": "3"},
        "secrets": [hf_token],
    }
    created = owner_api.post(API, body, format="json")
    assert created.status_code == 201, created.json()
    settle()
    detail = owner_api.get(f"{API}/{created.json()['id']}")
    listed = owner_api.get(API)
    data = detail.json()
    assert data["start_command"] == "python train.py" and data["env"] == {"EPOCHS": "3"}
    assert data["secrets"] == ["HF_TOKEN"]
    for response in (created, detail, listed):
        assert b"S3cr3t" not in response.content


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"env": {"HOME": "/x"}}, "env"),
        ({"env": {"A": None}}, "env"),
        ({"env": "A=1"}, "env"),
        ({"start_command": "a\x00b"}, "start_command"),
        ({"start_command": "x" * 5000}, "start_command"),
        ({"secrets": ["NOPE"]}, "secrets"),
        ({"secrets": "HF_TOKEN"}, "secrets"),
    ],
)
def test_the_api_answers_bad_boot_options_with_a_field_error(owner_api, lifecycle, hf_token, body, field):
    body = {"name": "bad", "image": "pytorch-2.2-neuware", "chip": "mlu370-x8", **body}
    response = owner_api.post(API, body, format="json", HTTP_ACCEPT_LANGUAGE="en")
    missing = body.get("secrets") == ["NOPE"]  # a secret the owner does not have is not there: 404, as in the API
    assert response.status_code == (404 if missing else 400), response.json()
    assert field in response.json()["errors"] and response.json()["message"]
    assert not Instance.objects.exists()


def test_the_api_error_is_in_chinese_for_a_chinese_client(owner_api, lifecycle):
    body = {"name": "bad", "image": "pytorch-2.2-neuware", "chip": "mlu370-x8", "env": {"HOME": "/x"}}
    response = owner_api.post(API, body, format="json", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert response.status_code == 400 and "HOME" in response.json()["message"] and "平台" in response.json()["message"]


@pytest.fixture
def english(owner_client, settings):
    owner_client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    return owner_client


WIZARD = {
    "chip": "mlu370-x8",
    "cards": "1",
    "plan": "payg",
    "image": "pytorch-2.2-neuware",
    "name": "from-page",
    "term_end_action": "continue",
}


def test_the_wizard_launches_with_boot_options(english, lifecycle, hf_token):
    data = WIZARD | {"start_command": "python train.py", "env": "EPOCHS=3\r\nLR=0.1", "secrets": [hf_token]}
    response = english.post(reverse("instances:launch"), data)
    instance = Instance.objects.get()
    assert response.status_code == 302
    assert instance.env == {"EPOCHS": "3", "LR": "0.1"} and instance.secret_names == ["HF_TOKEN"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"env": "EPOCHS 3"}, "Line 1: write NAME=value."),
        ({"env": "PATH=/x"}, "PATH is set by the platform"),
        ({"start_command": "x" * 4097}, "at most 4096 bytes"),
        ({"secrets": ["SOMEONE_ELSES"]}, "You have no secret named SOMEONE_ELSES"),
    ],
)
def test_the_wizard_shows_bad_boot_options_beside_their_field_in_the_open_section(english, lifecycle, data, message):
    response = english.post(reverse("instances:launch"), WIZARD | data)
    html = response.content.decode()
    assert response.status_code == 400 and message in html
    assert '<details class="card mt-3" id="wizard-advanced" open>' in html
    assert not Instance.objects.exists()


def test_the_wizard_offers_only_the_users_own_secrets(english, hf_token, stranger, catalog):
    secrets.put_secret(stranger, "STRANGERS_KEY", "x")
    html = english.get(reverse("instances:launch")).content.decode()
    assert 'value="HF_TOKEN"' in html and "STRANGERS_KEY" not in html and "S3cr3t" not in html
    assert 'id="wizard-advanced"' in html and 'id="wizard-advanced" open' not in html


def test_a_one_click_clone_launches_with_boot_options(owner_api, lifecycle, hf_token):
    body = {"env": {"EPOCHS": "3"}, "start_command": "python train.py", "secrets": [hf_token]}
    response = owner_api.post("/api/v1/images/mindspore-2.3/clone", body, format="json")
    assert response.status_code == 201, response.json()
    instance = Instance.objects.get()
    assert instance.env == {"EPOCHS": "3"} and instance.secret_names == ["HF_TOKEN"]
    refused = owner_api.post("/api/v1/images/mindspore-2.3/clone", {"env": {"PATH": "x"}}, format="json")
    assert refused.status_code == 400 and "env" in refused.json()["errors"]


# At boot --------------------------------------------------------------------------------------------------------


def test_boot_environment_gives_the_variables_and_the_secrets_current_values(launch, owner, hf_token):
    instance = launch(env={"EPOCHS": "3"}, secrets=[hf_token])
    assert boot_environment(instance) == {"EPOCHS": "3", "HF_TOKEN": VALUE}
    secrets.put_secret(owner, "HF_TOKEN", "rotated")
    assert boot_environment(instance) == {"EPOCHS": "3", "HF_TOKEN": "rotated"}
    assert boot_environment(launch(name="plain")) == {}


def test_a_secret_deleted_since_the_launch_is_left_out_and_the_timeline_says_so_once(launch, owner, hf_token):
    instance = launch(secrets=[hf_token])
    secrets.delete_secret(owner, "HF_TOKEN")

    assert boot_environment(instance) == {}
    assert boot_environment(instance) == {}  # a retried submission says it once
    notes = InstanceEvent.objects.filter(instance=instance, reason=Reason.SECRET_MISSING)
    assert [(n.detail, n.old == n.new) for n in notes] == [("HF_TOKEN", True)]


def test_secret_values_appear_in_no_event_page_or_api_answer_across_a_lifecycle(
    owner_client, owner_api, launch, hf_token
):
    instance = launch(env={"EPOCHS": "3"}, secrets=[hf_token])
    settle()
    boot_environment(instance)
    pages = [owner_client.get(instance.get_absolute_url()), owner_client.get(reverse("instances:list"))]
    answers = [owner_api.get(f"{API}/{instance.public_id}"), owner_api.get(f"{API}/{instance.public_id}/logs")]
    for response in pages + answers:
        assert response.status_code == 200 and b"S3cr3t" not in response.content
    page = pages[0].content.decode()
    assert "HF_TOKEN" in page and "EPOCHS=3" in page
    assert not any("S3cr3t" in f"{e.detail} {e.data}" for e in InstanceEvent.objects.all())


def test_a_slurm_job_runs_the_start_command_with_the_owners_environment(launch, hf_token, settings, tmp_path):
    settings.SLURM = {**settings.SLURM, "root": str(tmp_path), "workload": ["python3", "quickstart.py"]}
    instance = launch(start_command="echo 你好 && python train.py", env={"EPOCHS": "3"}, secrets=[hf_token])
    backend = SlurmBackend()

    script, job = backend.job_description(instance, backend.config(instance))

    argv = shlex.split(script.splitlines()[1])
    assert argv[:3] == ["exec", settings.SLURM["agent_python"], "-I"]
    assert argv[argv.index("--") :] == ["--", "/bin/sh", "-c", "echo 你好 && python train.py"]
    env = job["environment"]
    assert env["EPOCHS"] == "3" and env["HF_TOKEN"] == VALUE and env["PATH"] == "/usr/local/bin:/usr/bin:/bin"
    assert env["GPUCLOUD_AGENT_TOKEN"].startswith("gca_") and VALUE not in script

    plain = launch(name="plain")
    script, _job = backend.job_description(plain, backend.config(plain))
    assert shlex.split(script.splitlines()[1])[-3:] == ["--", "python3", "quickstart.py"]  # the zone's default
