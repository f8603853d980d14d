"""Image references and the registries an import may reach: only public addresses, the tests' loopback by setting.

No test here sends anything anywhere: a refused registry is refused before any connection, and names are resolved
by a stand-in for the resolver."""

import socket

import pytest

from marketplace.images import references


def test_a_bare_name_is_docker_hubs_library_image_at_latest():
    assert str(references.parse("busybox")) == "docker.io/library/busybox:latest"
    assert str(references.parse("pytorch/pytorch:2.2")) == "docker.io/pytorch/pytorch:2.2"


def test_a_registry_with_a_port_and_a_digest_is_kept_as_written():
    digest = "sha256:" + "a" * 64
    parsed = references.parse(f"registry.example.com:5000/team/train@{digest}")
    assert (parsed.registry, parsed.path, parsed.tag, parsed.digest) == (
        "registry.example.com:5000",
        "team/train",
        "",
        digest,
    )
    assert parsed.host == "registry.example.com"


@pytest.mark.parametrize(
    "text", ["", "UPPER/case", "a b", "reg.io/x:bad tag", "reg.io/x@sha256:short", "reg.io/../x", "x" * 600]
)
def test_a_malformed_reference_is_refused(text):
    with pytest.raises(references.BadReference):
        references.parse(text)


@pytest.mark.parametrize(
    "host",
    ["10.0.0.5", "192.168.1.10", "172.16.0.1", "169.254.169.254", "100.64.0.1", "[fd00::1]", "[fe80::1]", "0.0.0.0"],
)
def test_a_registry_on_a_private_or_link_local_address_is_refused(settings, host):
    settings.IMAGE_IMPORT_ALLOW_LOOPBACK = True
    with pytest.raises(references.RegistryRefused):
        references.check_registry(references.parse(f"{host}:5000/team/image:1"))


def test_the_loopback_is_refused_unless_the_setting_allows_it(settings):
    reference = references.parse("127.0.0.1:5000/team/image:1")
    settings.IMAGE_IMPORT_ALLOW_LOOPBACK = False
    with pytest.raises(references.RegistryRefused):
        references.check_registry(reference)
    settings.IMAGE_IMPORT_ALLOW_LOOPBACK = True
    assert references.check_registry(reference) is True  # spoken to without TLS


def test_a_name_that_resolves_to_a_private_address_is_refused(settings, monkeypatch):
    settings.IMAGE_IMPORT_ALLOW_LOOPBACK = True
    answers = [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", 0))]
    answers.append((socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.1.2.3", 0)))
    monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: answers)
    with pytest.raises(references.RegistryRefused):
        references.check_registry(references.parse("registry.example.com/team/image:1"))


def test_a_name_that_resolves_only_to_public_addresses_is_allowed(monkeypatch):
    answers = [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", 0))]
    monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: answers)
    assert references.check_registry(references.parse("registry.example.com/team/image:1")) is False
