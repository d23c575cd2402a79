"""Address ranges as sets: whether CIDRs together cover every address.

A leaf module (``ipaddress`` only) so that the config layer can check ranges without importing the
endpoint and reach analysis above the renderers (``components.tools.endpoints``, ``components.tools.reach``).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

EVERYONE = frozenset({"0.0.0.0/0", "::/0"})


def covers_everyone(cidrs: Iterable[str]) -> bool:
    """True when the ranges together admit every IPv4 or every IPv6 address (``0.0.0.0/0``,
    ``::0/0``, or ``0.0.0.0/1`` + ``128.0.0.0/1``); unparsable entries are ignored (validated elsewhere)."""
    v4: list[ipaddress.IPv4Network] = []
    v6: list[ipaddress.IPv6Network] = []
    for cidr in cidrs:
        try:
            net = ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            continue
        if isinstance(net, ipaddress.IPv4Network):
            v4.append(net)
        else:
            v6.append(net)
    return any(n.prefixlen == 0 for n in ipaddress.collapse_addresses(v4)) or any(
        n.prefixlen == 0 for n in ipaddress.collapse_addresses(v6)
    )
