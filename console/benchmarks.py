"""Console benchmarks: the cost of authenticating an API request with a token."""

from django.test import Client

from console import services
from console.bench import benchmark
from console.models import User


@benchmark("API: GET /api/v1/me with a token")
def api_me(report):
    user, _ = User.objects.get_or_create(email="bench-me@example.com")
    token = services.create_api_token(user, name="bench", scope="read").plaintext
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    durations = []
    for _ in range(300):
        with report.timer() as t:
            assert client.get("/api/v1/me").status_code == 200
        durations.append(t.seconds)
    report.add_latencies("server time", durations, note="in-process test client")
