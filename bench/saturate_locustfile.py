"""Locust without think time, for `make bench`'s saturation run: every simulated client asks for one page
(``BENCH_PATH``) again as soon as the answer arrives, so the server, not the think time, sets the pace."""

import os

from locust import FastHttpUser, constant, task


class Saturating(FastHttpUser):
    wait_time = constant(0)

    def on_start(self):
        cookie = os.environ.get("BENCH_COOKIE")
        self.headers = {"Cookie": cookie, "Accept-Language": "zh-hans"} if cookie else {"Accept-Language": "zh-hans"}

    @task
    def page(self):
        with self.client.get(
            os.environ["BENCH_PATH"], headers=self.headers, name="page", allow_redirects=False, catch_response=True
        ) as response:
            if response.status_code != 200:
                response.failure(f"HTTP {response.status_code}")
