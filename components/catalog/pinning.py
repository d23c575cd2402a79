"""What a pinned container image is: the one definition, shared by the config specs (rejected at
load) and the policy pack (rejected on real previews, Helm values included). It imports only the
image catalog's digest pattern (pure data), so the policy pack loads it without the SDKs.

An image is pinned when it carries a digest (``@sha256:<64 hex>``, with or without a tag), or a
*version tag*: a tag that contains a version number of at least two dot-separated numbers
(``v0.27.0``, ``jax-0.5.3``, ``525.0.0-slim``, ``ray2.49.1-maxtext0.1.0-fcc470b70831``) and no word
that names a moving target (``latest``, ``rolling``, ``stable``, ... anywhere among its ``-_.+``
separated words). So ``rolling``, ``latest-tpu`` and ``stable-v2`` are refused, and so is a
major-only tag (``v2``, ``20``): registries move those to every new minor release.
"""

from __future__ import annotations

import re

# A container image reference: registry/path, then a tag and/or a digest.
_IMAGE = re.compile(
    r"^[a-z0-9](?:[a-z0-9._/:-]*?[a-z0-9])??(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?(?:@sha256:[a-f0-9]{64})?$"
)
# Tags that name a moving target rather than one build (whole tag, or one word of it).
FLOATING_TAGS = frozenset(
    {
        "latest",
        "nightly",
        "main",
        "master",
        "stable",
        "edge",
        "rolling",
        "dev",
        "devel",
        "develop",
        "head",
        "trunk",
        "current",
        "snapshot",
        "canary",
        "unstable",
    }
)
_VERSION_NUMBER = re.compile(r"\d+\.\d+")
_TAG_WORDS = re.compile(r"[-_.+]")


def tag_problem(tag: str) -> str | None:
    """Why a tag is not a version tag (see the module docstring), or None."""
    words = set(_TAG_WORDS.split(tag.lower()))
    if words & FLOATING_TAGS:
        return f"uses the floating tag {tag!r}"
    if not _VERSION_NUMBER.search(tag):
        return f"uses the tag {tag!r}, which has no major.minor version number (a version tag has one, like v1.2 or 0.5.3)"
    return None


def image_problem(image: str) -> str | None:
    """Why an image reference is not pinned, or None. Digests and version tags pass.

    The one definition of "pinned" in the project: the workload specs reject such images at config
    load and the policy pack rejects them on real previews.
    """
    match = _IMAGE.match(image)
    if match is None:
        return "is not a valid image reference"
    if "@sha256:" in image:
        return None
    tag = match.group("tag")
    if tag is None:
        return "has no tag (resolves to :latest)"
    return tag_problem(tag)
