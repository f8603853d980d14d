"""HTTP client and configuration for the CLI."""

import json
import os
import sys
from pathlib import Path

import requests
from tabulate import tabulate

DEFAULT_URL = "http://127.0.0.1:8000"


def config_path() -> Path:
    if path := os.environ.get("GPUCLOUD_CONFIG"):
        return Path(path)
    base = Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config"))
    return base / "gpucloud" / "config.json"


def load_config() -> dict:
    path = config_path()
    return json.loads(path.read_text()) if path.exists() else {}


def save_config(config: dict) -> Path:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2))
    path.chmod(0o600)  # the token is a secret
    return path


class CliError(Exception):
    """An error to show the user, then exit with status 1."""


class Api:
    def __init__(self, url: str, token: str | None, language: str | None = None):
        self.url = url.rstrip("/")
        self.session = requests.Session()
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"
        if language:
            self.session.headers["Accept-Language"] = language

    @classmethod
    def from_args(cls, args) -> "Api":
        config = load_config()
        url = args.url or os.environ.get("GPUCLOUD_URL") or config.get("url") or DEFAULT_URL
        team = getattr(args, "team", None)
        if team and not args.token:
            # A team's commands go with that team's token: the API takes the team from the token, nothing else.
            token = config.get("team_tokens", {}).get(team)
            if not token:
                raise CliError(f"no token saved for team {team}: run `gpucloud teams token {team}` first")
        else:
            token = args.token or os.environ.get("GPUCLOUD_TOKEN") or config.get("token")
        return cls(url, token, getattr(args, "lang", None))

    def request(self, method: str, path: str, **kwargs):
        try:
            response = self.session.request(method, f"{self.url}/api/v1/{path.lstrip('/')}", timeout=60, **kwargs)
        except requests.RequestException as exc:
            raise CliError(f"cannot reach {self.url}: {exc}") from exc
        if response.status_code >= 400:
            try:
                body = response.json()
                message = body.get("message") or body
            except ValueError:
                message = response.text[:200]
            raise CliError(f"{response.status_code}: {message}")
        return response.json() if response.content else None

    def get(self, path, **params):
        return self.request("GET", path, params=params or None)

    def post(self, path, data=None):
        return self.request("POST", path, json=data or {})

    def patch(self, path, data=None):
        return self.request("PATCH", path, json=data or {})

    def delete(self, path):
        return self.request("DELETE", path)

    def list(self, path, **params):
        """All results of a paginated list."""
        body = self.get(path, **params)
        return body["results"] if isinstance(body, dict) and "results" in body else body


def output(args, data, columns: list[tuple[str, str]] | None = None) -> None:
    """Print ``data`` as JSON with --json, else as a table of ``columns`` (header, key) or key: value lines."""
    if args.json:
        json.dump(data, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return
    if isinstance(data, list):
        columns = columns or [(k, k) for k in (data[0].keys() if data else [])]
        rows = [[_cell(item, key) for _, key in columns] for item in data]
        print(tabulate(rows, headers=[h for h, _ in columns], tablefmt="simple") if rows else "(none)")
    else:
        for key, value in data.items():
            print(f"{key}: {value}")


def _cell(item: dict, key: str):
    value = item
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else value
