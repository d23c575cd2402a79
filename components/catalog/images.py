"""Every third-party container image the project renders or installs, pinned by tag and digest. Pure data.

The table is ``images.json`` beside this module (one row per image repository and tag), so that
``python -m components.catalog.refresh_images`` can rewrite it from the registries. Each row says
where its digest was read and when: either the registry itself (the refresh script's
``https://<registry>/v2/<name>/manifests/<tag>``) or, for a digest vendored from public sources
because no registry was reachable, the repository, file, commit or thread it came from. A row whose
digest could not be found anywhere says so in ``source`` and has ``digest: null``; such an image
renders by tag only until the refresh script fills it in (``tests/test_images.py`` lists them).

References render as ``repository:tag@sha256:<digest>``: the tag for the reader, the digest for the
runtime, which pulls exactly the content the digest names (digests are immutable, tags can move:
kubernetes.io "Images", "Image names"; GKE "About container image digests"). Workload specs take their default images from here
(:func:`image`), and the Helm controllers (``components.crds.releases``) pin their chart's
controller image from here by release (:func:`image` with the tag ``v<version>``).

The user-built MaxText training image is not here: its digest exists only once the user's build
has pushed it (``workload.maxtextRay.image.built``, ``components/workloads/maxtext_ray``).
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TABLE = Path(__file__).with_name("images.json")
"""The vendored table (rewritten by ``components.catalog.refresh_images``)."""

DIGEST = re.compile(r"^sha256:[a-f0-9]{64}$")
"""An OCI content digest as the project pins it (SHA-256, the algorithm every registry here uses)."""

# An image reference: repository (registry host and path), then an optional tag and digest. The
# repository may carry a registry port (127.0.0.1:5000/x), so the tag is the part after the last
# ':' that follows the last '/'.
_REFERENCE = re.compile(
    r"^(?P<repository>[a-z0-9][a-z0-9._-]*(?::[0-9]+(?=/))?(?:/[a-z0-9][a-z0-9._-]*)*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?"
    r"(?:@(?P<digest>sha256:[a-f0-9]{64}))?$"
)


@dataclass(frozen=True)
class ImagePin:
    """One image repository at one tag, and the digest that tag named when it was read."""

    name: str
    """Short key the code looks the image up by (several tags of one controller share it)."""
    repository: str
    """Registry host and path, as the manifests spell it (Docker Hub images without ``docker.io/``)."""
    tag: str
    digest: str | None
    """``sha256:<64 hex>``, or None when no source could be found (the image then renders by tag)."""
    source: str
    """Where the digest was read (a registry URL, or a public repository/file/commit or thread), or
    where it was looked for when ``digest`` is None."""
    read: str
    """Date the digest was read (ISO, ``YYYY-MM-DD``)."""
    note: str = ""
    """Why this tag, when it differs from what the project used before (kept for the next reader)."""

    @property
    def tag_and_digest(self) -> str:
        """``<tag>@sha256:<digest>`` (or the tag alone): what a chart's ``image.tag`` value takes when its
        template writes ``repository:tag``."""
        return f"{self.tag}@{self.digest}" if self.digest else self.tag

    @property
    def ref(self) -> str:
        """``repository:tag@sha256:<digest>`` (or ``repository:tag`` while the digest is unknown)."""
        return f"{self.repository}:{self.tag_and_digest}"


@dataclass(frozen=True)
class Reference:
    """An image reference split into its parts."""

    repository: str
    tag: str | None
    digest: str | None


def parse(reference: str) -> Reference | None:
    """The parts of ``reference``, or None when it is not an image reference."""
    match = _REFERENCE.match(reference)
    if match is None:
        return None
    return Reference(match["repository"], match["tag"], match["digest"])


def _row(raw: Mapping[str, Any], where: str) -> ImagePin:
    fields = {"name", "repository", "tag", "digest", "source", "read", "note"}
    unknown = set(raw) - fields
    missing = {"name", "repository", "tag", "digest", "source", "read"} - set(raw)
    if unknown or missing:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}, missing keys {sorted(missing)}")
    pin = ImagePin(**{key: raw[key] for key in fields if key in raw})
    parsed = parse(f"{pin.repository}:{pin.tag}")
    if parsed is None or parsed.repository != pin.repository or parsed.tag != pin.tag:
        raise ValueError(f"{where}: {pin.repository}:{pin.tag} is not an image repository and tag")
    if pin.digest is not None and not DIGEST.match(pin.digest):
        raise ValueError(f"{where}: digest {pin.digest!r} is not sha256:<64 lowercase hex>")
    if not pin.source.strip():
        raise ValueError(f"{where}: source is empty; say where the digest was read (or looked for)")
    try:
        datetime.date.fromisoformat(pin.read)
    except ValueError as error:
        raise ValueError(f"{where}: read {pin.read!r} is not a YYYY-MM-DD date") from error
    return pin


def load(path: Path = TABLE) -> tuple[ImagePin, ...]:
    """The rows of a table file, checked (digest form, dates, sources, no repository and tag twice)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    rows = tuple(_row(raw, f"{path.name} row {index}") for index, raw in enumerate(data["images"]))
    seen: set[tuple[str, str]] = set()
    for pin in rows:
        for key in ((pin.repository, pin.tag), (pin.name, pin.tag)):
            if key in seen:
                raise ValueError(f"{path.name}: {key[0]}:{key[1]} is listed twice")
            seen.add(key)
    return rows


def dump(rows: Iterable[ImagePin], path: Path = TABLE) -> None:
    """Write ``rows`` as a table file (the format :func:`load` reads; stable for diffs)."""
    images = []
    for pin in rows:
        row: dict[str, Any] = {
            "name": pin.name,
            "repository": pin.repository,
            "tag": pin.tag,
            "digest": pin.digest,
            "source": pin.source,
            "read": pin.read,
        }
        if pin.note:
            row["note"] = pin.note
        images.append(row)
    path.write_text(json.dumps({"images": images}, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


IMAGES: tuple[ImagePin, ...] = load()
"""The vendored table, in file order."""


def image(name: str, tag: str | None = None) -> ImagePin:
    """The row named ``name`` (at ``tag`` when several tags share the name, as a controller's releases do)."""
    rows = [pin for pin in IMAGES if pin.name == name and (tag is None or pin.tag == tag)]
    if len(rows) != 1:
        tags = sorted(pin.tag for pin in IMAGES if pin.name == name)
        raise KeyError(f"image {name!r} at tag {tag!r}: the catalog has tags {tags} (components/catalog/images.json)")
    return rows[0]


def pin_of(repository: str, tag: str) -> ImagePin | None:
    """The row of ``repository:tag``, or None when the catalog does not list that image."""
    return next((pin for pin in IMAGES if pin.repository == repository and pin.tag == tag), None)


def pinned(repository: str, tag: str) -> str:
    """``repository:tag`` with its catalog digest, or as given when the catalog does not list it (a
    tag the user chose over the default; the config's pinned-tag rule still applies to it)."""
    pin = pin_of(repository, tag)
    return pin.ref if pin is not None else f"{repository}:{tag}"
