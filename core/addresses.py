"""Whether an address is a public one, the rule every outbound request to a user's address checks (webhooks, image
registries): the address is globally routable, not multicast, and no IPv6 form that carries an IPv4 address inside
(mapped, 6to4, NAT64, IPv4-compatible, Teredo) leads to a private one."""

import ipaddress

# NAT64 (RFC 6052, 8215): a gateway there reaches the IPv4 address inside, whatever it is; never a user's address.
NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))


def is_public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address):
        if any(address in network for network in NAT64) or address.teredo is not None:
            return False
        inner = address.ipv4_mapped or address.sixtofour
        if inner is None and int(address) >> 32 == 0:  # ::a.b.c.d, the deprecated IPv4-compatible form
            return False
        if inner is not None:
            address = inner
    return address.is_global and not address.is_multicast
