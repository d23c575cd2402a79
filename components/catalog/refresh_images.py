"""Refresh the image digests of ``components/catalog/images.json`` from the registries.

    python -m components.catalog.refresh_images              # read every row's tag, rewrite the table
    python -m components.catalog.refresh_images --check      # read and print; write nothing, exit 1 on a change
    python -m components.catalog.refresh_images --only kueue # only the rows with that name

For each row it asks the row's registry which manifest the tag names now, through the OCI
distribution API: ``HEAD /v2/<name>/manifests/<tag>`` with an ``Accept`` of the OCI image index, the
Docker manifest list and both single-image manifests (so a multi-platform tag resolves to its index,
the digest ``docker buildx imagetools inspect`` prints), reading ``Docker-Content-Digest``; when a
registry leaves that header out it GETs the manifest and hashes the bytes (the digest is defined as
the SHA-256 of the manifest as served). Public images need no credentials, but Docker Hub, gcr.io,
``*-docker.pkg.dev`` and registry.k8s.io answer ``401`` with a ``WWW-Authenticate: Bearer`` challenge
first; the script then fetches an anonymous pull token from the challenge's realm and retries.
(OCI distribution-spec ``spec.md``, "Pulling manifests" and "Checking if content exists";
Docker registry token authentication, ``docs/spec/auth/token.md``.)

It prints one line per row (``=`` unchanged, ``~`` changed, ``+`` newly found) and, unless
``--check``, rewrites the table with the digests read, each row's ``source`` set to the manifest URL it
was read from and ``read`` to today's date (UTC). Nothing is written when any row fails (unreachable
registry, unknown tag, a malformed answer): the errors are printed and the exit status is 2, so a
half-refreshed table never lands. A changed digest under an unchanged tag means the publisher moved the
tag: review it like a version bump before committing the rewritten table.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import hashlib
import ipaddress
import json
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .images import DIGEST, TABLE, ImagePin, dump, load

MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
"""What the script accepts, index types first: a multi-platform tag then resolves to its index."""

DOCKER_HUB = "registry-1.docker.io"
"""Where Docker Hub's short names (``curlimages/curl``, ``alpine``) are served from."""

_CHALLENGE_PARAM = re.compile(r'(\w+)="([^"]*)"')


class RegistryError(Exception):
    """A registry did not say which digest a tag names (the message says which image and why)."""


@dataclass(frozen=True)
class Location:
    """Where a repository's manifests are served."""

    host: str
    name: str
    """The repository's name on that registry (Docker Hub's official images get ``library/``)."""

    @property
    def scheme(self) -> str:
        # Plain HTTP only for a registry on this machine (a test's, or a local mirror), as Docker
        # allows localhost registries without TLS; everything else is HTTPS.
        host = self.host.rsplit(":", 1)[0].strip("[]")
        if host == "localhost":
            return "http"
        try:
            return "http" if ipaddress.ip_address(host).is_loopback else "https"
        except ValueError:
            return "https"

    def manifest_url(self, tag: str) -> str:
        return f"{self.scheme}://{self.host}/v2/{self.name}/manifests/{tag}"


def locate(repository: str) -> Location:
    """The registry and name of ``repository``: the first path segment is a registry host when it has a
    dot, a port or is ``localhost`` (the rule docker and containerd use); otherwise Docker Hub."""
    first, _, rest = repository.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return Location(first, rest)
    return Location(DOCKER_HUB, repository if rest else f"library/{repository}")


def _token(challenge: str, timeout: float) -> str:
    """An anonymous pull token for a ``Bearer realm=...,service=...,scope=...`` challenge."""
    scheme, _, params = challenge.partition(" ")
    if scheme.lower() != "bearer":
        raise RegistryError(f"asks for {scheme} authentication; only anonymous bearer tokens are supported")
    fields = dict(_CHALLENGE_PARAM.findall(params))
    realm = fields.pop("realm", None)
    if not realm:
        raise RegistryError(f"its Bearer challenge names no realm: {challenge!r}")
    query = urllib.parse.urlencode({k: v for k, v in fields.items() if k in ("service", "scope")})
    with urllib.request.urlopen(f"{realm}?{query}" if query else realm, timeout=timeout) as response:
        body = json.loads(response.read().decode("utf-8"))
    token = body.get("token") or body.get("access_token")
    if not isinstance(token, str) or not token:
        raise RegistryError(f"the token service {realm} returned no token")
    return token


def resolve(repository: str, tag: str, *, timeout: float = 30.0) -> tuple[str, str]:
    """The digest ``repository:tag`` names now, and the manifest URL it was read from."""
    where = locate(repository)
    url = where.manifest_url(tag)
    headers = {"Accept": ", ".join(MANIFEST_TYPES)}

    def fetch(method: str) -> tuple[str | None, bytes]:
        request = urllib.request.Request(url, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.headers.get("Docker-Content-Digest"), response.read() if method == "GET" else b""
        except urllib.error.HTTPError as error:
            challenge = error.headers.get("WWW-Authenticate", "") if error.code == 401 else ""
            if not challenge or "Authorization" in headers:
                reason = "the tag does not exist" if error.code == 404 else f"HTTP {error.code} {error.reason}"
                raise RegistryError(f"{url}: {reason}") from error
        headers["Authorization"] = f"Bearer {_token(challenge, timeout)}"
        return fetch(method)

    try:
        digest, _ = fetch("HEAD")
        if digest is None:  # the header is optional for registries; the digest is the manifest's SHA-256
            _, body = fetch("GET")
            digest = "sha256:" + hashlib.sha256(body).hexdigest()
    except urllib.error.URLError as error:
        raise RegistryError(f"{url}: unreachable ({error.reason})") from error
    except (OSError, ValueError) as error:
        raise RegistryError(f"{url}: {error}") from error
    if not DIGEST.match(digest):
        raise RegistryError(f"{url}: answered digest {digest!r}, not sha256:<64 hex>")
    return digest, url


def refresh(
    rows: Sequence[ImagePin], *, today: str, timeout: float = 30.0
) -> tuple[list[ImagePin], list[str], list[str]]:
    """Every row re-read from its registry: the new rows, one report line per row, and the errors."""
    refreshed: list[ImagePin] = []
    lines: list[str] = []
    errors: list[str] = []
    for pin in rows:
        try:
            digest, url = resolve(pin.repository, pin.tag, timeout=timeout)
        except RegistryError as error:
            errors.append(f"{pin.repository}:{pin.tag}: {error}")
            refreshed.append(pin)
            continue
        mark = "=" if digest == pin.digest else ("+" if pin.digest is None else "~")
        change = digest if mark == "=" else f"{pin.digest or '(none)'} -> {digest}"
        lines.append(f"{mark} {pin.repository}:{pin.tag} {change}")
        refreshed.append(dataclasses.replace(pin, digest=digest, source=url, read=today))
    return refreshed, lines, errors


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m components.catalog.refresh_images", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="print what changed, write nothing; exit 1 on a change")
    parser.add_argument("--only", action="append", metavar="NAME", help="refresh only rows with this name (repeatable)")
    parser.add_argument("--table", type=Path, default=TABLE, help=f"the table file (default {TABLE})")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per registry request (default 30)")
    args = parser.parse_args(argv)
    try:
        rows = load(args.table)
    except (OSError, ValueError, KeyError) as error:
        print(f"error: --table {args.table}: {error}", file=sys.stderr)
        return 2
    names = sorted({pin.name for pin in rows})
    unknown = sorted(set(args.only or ()) - set(names))
    if unknown:
        print(f"error: --only {', '.join(unknown)}: no such row; the table has {', '.join(names)}", file=sys.stderr)
        return 2
    chosen = [pin for pin in rows if not args.only or pin.name in args.only]
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    refreshed, lines, errors = refresh(chosen, today=today, timeout=args.timeout)
    for line in lines:
        print(line)
    if errors:
        for message in errors:
            print(f"error: {message}", file=sys.stderr)
        print(f"error: {len(errors)} of {len(chosen)} images not read; {args.table} left unchanged", file=sys.stderr)
        return 2
    changed = any(not line.startswith("=") for line in lines)
    if args.check:
        return 1 if changed else 0
    by_key = {(pin.repository, pin.tag): pin for pin in refreshed}
    dump([by_key.get((pin.repository, pin.tag), pin) for pin in rows], args.table)
    print(f"wrote {args.table} ({len(refreshed)} rows read from their registries)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
