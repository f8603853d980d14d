"""Locust's scenario for `make bench`: people logged in as the long-history user open its pages at random.

`bench/pages.py` starts gunicorn and runs this file with the pages and a session cookie in the environment.
"""

import json
import os
import random

from locust import HttpUser, between, task

PAGES = json.loads(os.environ["BENCH_PAGES"])


class ConsoleUser(HttpUser):
    wait_time = between(0.1, 0.5)

    def on_start(self):
        self.client.cookies.set(os.environ["BENCH_SESSION_COOKIE"], os.environ["BENCH_SESSION"])

    @task
    def open_a_page(self):
        label, url = random.choice(PAGES)
        with self.client.get(url, name=label, allow_redirects=False, catch_response=True) as response:
            if response.status_code != 200:
                response.failure(f"HTTP {response.status_code}")
