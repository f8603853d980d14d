"""Storage benchmarks: tus upload throughput through the real views, storage backend and database."""

import os

from django.test import Client

from accounts import services as console_services
from accounts.models import User
from bench import benchmark
from storage import services

MB = 1024 * 1024
TUS = {"HTTP_TUS_RESUMABLE": "1.0.0"}


@benchmark("Storage: tus upload of a 64 MB file in 5 MB chunks")
def upload_throughput(report):
    user, _ = User.objects.get_or_create(email="bench-storage@example.com")
    token = console_services.create_api_token(user, name="bench", scope="read_write").plaintext
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    data = os.urandom(64 * MB)
    headers = {"HTTP_UPLOAD_LENGTH": str(len(data)), "HTTP_UPLOAD_METADATA": "filename YmVuY2guYmlu"}  # bench.bin
    created = client.post("/api/v1/storage/uploads", **headers, **TUS)
    url, offset = created["Location"], 0
    with report.timer() as t:
        while offset < len(data):
            response = client.generic(
                "PATCH",
                url,
                data=data[offset : offset + 5 * MB],
                content_type="application/offset+octet-stream",
                HTTP_UPLOAD_OFFSET=str(offset),
                **TUS,
            )
            assert response.status_code == 204, response.content
            offset = int(response["Upload-Offset"])
    report.add("throughput", 64 / t.seconds, unit="MB/s", note="in-process client, fsync per chunk, SHA-256 at end")
    report.add("total", t.seconds, unit="s")
    services.delete(user, response["Storage-Entry-Id"])
