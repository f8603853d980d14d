import pytest


@pytest.fixture
def client(client):
    """Pages in English, so tests can read the messages (the default is Simplified Chinese)."""
    client.cookies["django_language"] = "en"
    return client
