"""A remote host as the user writes it: ``[USER@]HOST[:PORT]`` (an IPv6 address in brackets:
``[::1]:2222``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuscope.errors import UserError

# A user or host name that ssh takes as one word: no spaces, no shell or option characters.
_NAME = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.%+-]*\Z")
_IPV6 = re.compile(r"[0-9A-Fa-f:.]+(%[A-Za-z0-9_.-]+)?\Z")


@dataclass(frozen=True)
class HostSpec:
    """Where to connect: ``host`` (a name from ~/.ssh/config, a DNS name or an address), with an
    optional ``user`` and ``port`` (None: what ssh and its config say)."""

    host: str
    user: str | None = None
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> HostSpec:
        """``[USER@]HOST[:PORT]``; a bad spec raises UserError (one line)."""
        spec = text.strip()
        user: str | None = None
        if "@" in spec:
            user, _, spec = spec.rpartition("@")
            if not _NAME.match(user):
                raise UserError(f"bad host {text!r}: the user name {user!r} is not valid (use [USER@]HOST[:PORT])")
        port_text: str | None = None
        if spec.startswith("["):
            host, sep, rest = spec[1:].partition("]")
            if not sep or not host or ":" not in host or not _IPV6.match(host):
                raise UserError(f"bad host {text!r}: an IPv6 address is written [ADDRESS]:PORT, e.g. [::1]:2222")
            if rest:
                if not rest.startswith(":"):
                    raise UserError(f"bad host {text!r}: expected :PORT after ]")
                port_text = rest[1:]
        else:
            host, sep, port_part = spec.partition(":")
            if sep:
                if ":" in port_part:
                    raise UserError(f"bad host {text!r}: write an IPv6 address in brackets, e.g. [::1]:2222")
                port_text = port_part
            if not host or not _NAME.match(host):
                raise UserError(f"bad host {text!r}: expected [USER@]HOST[:PORT]")
        return cls(host=host, user=user, port=_port(port_text, text))

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port is not None else ""
        return f"{user}{host}{port}"


def _port(port_text: str | None, text: str) -> int | None:
    if port_text is None:
        return None
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise UserError(f"bad host {text!r}: the port must be a number from 1 to 65535")
    return int(port_text)
