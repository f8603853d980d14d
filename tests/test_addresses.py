"""The one rule for a user's outbound address: public, and no IPv6 form that hides a private IPv4 address inside.
Only reads addresses: nothing is sent anywhere."""

import ipaddress

import pytest

from core.addresses import is_public


@pytest.mark.parametrize(
    "address",
    [
        "10.0.0.1",
        "127.0.0.1",
        "169.254.169.254",
        "100.64.0.1",
        "192.168.1.1",
        "::1",
        "fe80::1",
        "fc00::1",
        "::ffff:10.0.0.1",  # mapped
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
        "64:ff9b:1::1",
        "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
        "::a9fe:a9fe",  # IPv4-compatible
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
        "224.0.0.1",
    ],
)
def test_private_addresses_and_their_ipv6_disguises_are_refused(address):
    assert not is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946", "::ffff:93.184.216.34"])
def test_public_addresses_are_allowed(address):
    assert is_public(ipaddress.ip_address(address))
