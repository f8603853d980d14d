"""Production settings refuse unsafe configuration and pass Django's deployment checks."""

import os
import subprocess
import sys

import pytest
from django.conf import settings

PRODUCTION_ENV = {
    "DJANGO_ENV": "production",
    "SECRET_KEY": "x" * 60 + "-production-secret-for-the-check",
    "ALLOWED_HOSTS": "console.example.com",
    "DATABASE_URL": "postgres://gpucloud@db.internal:5432/gpucloud",
    "CELERY_BROKER_URL": "redis://redis.internal:6379/0",
    "CACHE_URL": "rediscache://redis.internal:6379/1",
    "STRIPE_SECRET_KEY": "sk_live_for_the_deploy_check",
    "STRIPE_WEBHOOK_SECRET": "whsec_for_the_deploy_check",
}


def manage(*args, env):
    # Start from this environment minus what a test run sets for itself (the browser tests allow async-unsafe
    # ORM calls, which check --deploy rightly refuses).
    dropped = {*PRODUCTION_ENV, "DEBUG", "DJANGO_ALLOW_ASYNC_UNSAFE"}
    clean = {k: v for k, v in os.environ.items() if k not in dropped}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=settings.BASE_DIR,
        env=clean | env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_production_settings_pass_check_deploy():
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=PRODUCTION_ENV)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    "change, complaint",
    [
        ({"SECRET_KEY": ""}, "SECRET_KEY"),
        ({"ALLOWED_HOSTS": ""}, "ALLOWED_HOSTS"),
        ({"DATABASE_URL": "sqlite:///db.sqlite3"}, "PostgreSQL"),
        ({"CELERY_BROKER_URL": "filesystem://"}, "embedded broker"),
        ({"CACHE_URL": "locmemcache://"}, "CACHE_URL"),
        ({"DEBUG": "true"}, "DEBUG"),
        ({"DJANGO_ENV": "staging"}, "DJANGO_ENV"),
        ({"STRIPE_SECRET_KEY": ""}, "STRIPE_SECRET_KEY"),
    ],
)
def test_production_refuses_to_start_without_safe_settings(change, complaint):
    result = manage("check", env=PRODUCTION_ENV | change)
    assert result.returncode != 0
    assert complaint in result.stderr


def test_a_secret_can_come_from_a_file(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("k3J9-file-secret-" + "a1b2c3d4e5f6g7h8" * 4)
    env = {k: v for k, v in PRODUCTION_ENV.items() if k != "SECRET_KEY"} | {"SECRET_KEY_FILE": str(secret)}
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=env)
    assert result.returncode == 0, result.stderr


def test_production_pages_carry_the_content_security_policy_and_hsts():
    script = (
        "from django.test import Client;"
        "r = Client().get('/api/schema/', secure=True, HTTP_HOST='console.example.com');"
        "print(r.status_code);"
        "print(r['Content-Security-Policy']);"
        "print(r['Strict-Transport-Security'])"
    )
    result = manage("shell", "-c", script, env=PRODUCTION_ENV)
    assert result.returncode == 0, result.stdout + result.stderr
    status, csp, hsts = result.stdout.strip().splitlines()[-3:]
    assert status == "200"
    assert "default-src 'self'" in csp and "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "max-age=31536000" in hsts and "includeSubDomains" in hsts
