"""The serving engines and their releases: what each version supports, leaves untested or breaks, each
fact with its source. Pure data (the table is ``engine_releases.json`` beside this module), checked on import.

One home per fact: a release row says only when it came out and where that was read; a *fact* says
what holds for a span of releases (``from`` .. ``to``, inclusive) and why we believe it. A release that
no fact covers for a feature is **untested** for it: the catalog never assumes that a new release keeps
what an older one had (that is what the refresh procedure, ``components/workloads/vllm/README.md``
"Engine versions", verifies by hand). Config rules refuse a *broken* combination and name the first
later release that is not broken (:func:`fixed_in`); the default version of a stack is the newest
release in which nothing it selects is broken (:func:`newest_passing`).

Images: a release's image is ``<engine image>:v<version>``, pinned by its digest where
``images.json`` lists one (:func:`image_ref`; otherwise by tag, and ``tests/test_images.py`` lists
the gap).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

from . import images

TABLE = Path(__file__).with_name("engine_releases.json")
Status = Literal["supported", "untested", "broken"]
STATUSES: tuple[Status, ...] = ("supported", "untested", "broken")
NO_SOURCE = "no source in the engine catalog covers this release"

FEATURES: Mapping[str, str] = {
    "multiHostPipeline": "pipeline parallelism across hosts",
    "multiHostTensor": "tensor parallelism across hosts",
    "rayExecutor": "the Ray executor (multi-host)",
    "fp8Weights": "FP8 weights",
    "fp8KvCache": "FP8 KV cache",
    "prefixCaching": "automatic prefix caching",
    "speculativeDecoding": "speculative decoding",
    "kvConnector.TPUConnector": "the TPUConnector KV connector (prefill/decode, dense attention)",
    "kvConnector.TPUConnectorHMA": "the TPUConnectorHMA KV connector (prefill/decode, hybrid attention)",
}
"""Every feature a fact may name, with the words messages use."""


@dataclass(frozen=True)
class Release:
    version: str
    released: str | None
    """ISO date the release was built or published, None when no source dates it."""
    source: str


@dataclass(frozen=True)
class Fact:
    feature: str
    status: Status
    first: str
    last: str
    source: str


@dataclass(frozen=True)
class Engine:
    name: str
    label: str
    status: Literal["current", "archived"]
    image: str
    """Image repository; a release's tag is ``v<version>``."""
    releases: tuple[Release, ...]
    """Oldest first."""
    facts: tuple[Fact, ...]
    sources: Mapping[str, str]


def key(version: str) -> tuple[int, ...]:
    """A version's sort key (``0.30.0`` after ``0.29.0``)."""
    return tuple(int(part) for part in version.split("."))


def _source(text: str, sources: Mapping[str, str], where: str) -> str:
    if not text.strip():
        raise ValueError(f"{where}: empty source")
    def expand(part: str) -> str:  # a leading source key stands for its text (engine_releases.json "sources")
        head, _, rest = part.partition(" ")
        return f"{sources[head]}{' ' + rest if rest else ''}" if head in sources else part

    return "; ".join(expand(part) for part in text.split("; "))


def _engine(name: str, raw: Mapping[str, object], sources: Mapping[str, str]) -> Engine:
    where = f"engine_releases.json {name}"
    releases = tuple(
        Release(str(r["version"]), cast("str | None", r["released"]), _source(str(r["source"]), sources, where))
        for r in cast("list[dict[str, object]]", raw["releases"])
    )
    known = [r.version for r in releases]
    if known != sorted(known, key=key) or len(set(known)) != len(known):
        raise ValueError(f"{where}: releases must be listed once each, oldest first")
    for r in releases:
        if r.released is not None:
            datetime.date.fromisoformat(r.released)
    facts: list[Fact] = []
    for f in cast("list[dict[str, str]]", raw["facts"]):
        fact = Fact(f["feature"], cast(Status, f["status"]), f["from"], f["to"], _source(f["source"], sources, where))
        if fact.feature not in FEATURES or fact.status not in STATUSES:
            raise ValueError(f"{where}: unknown feature or status in {f}")
        if fact.first not in known or fact.last not in known or key(fact.first) > key(fact.last):
            raise ValueError(f"{where}: {fact.feature} spans {fact.first}..{fact.last}, not a range of listed releases")
        facts.append(fact)
    engine = Engine(name, str(raw["label"]), cast("Literal['current', 'archived']", raw["status"]), str(raw["image"]),
                    releases, tuple(facts), sources)
    for release in releases:  # no two facts about one feature of one release
        for feature in FEATURES:
            if len(_covering(engine, release.version, feature)) > 1:
                raise ValueError(f"{where}: {feature} of {release.version} is stated twice")
    return engine


def _covering(engine: Engine, version: str, feature: str) -> list[Fact]:
    return [f for f in engine.facts if f.feature == feature and key(f.first) <= key(version) <= key(f.last)]


def load(path: Path = TABLE) -> dict[str, Engine]:
    data = json.loads(path.read_text(encoding="utf-8"))
    sources: dict[str, str] = data["sources"]
    return {name: _engine(name, raw, sources) for name, raw in data["engines"].items()}


ENGINES: Mapping[str, Engine] = load()


def engine(name: str) -> Engine:
    return ENGINES[name]


def versions(name: str) -> tuple[str, ...]:
    return tuple(r.version for r in ENGINES[name].releases)


def release(name: str, version: str) -> Release | None:
    return next((r for r in ENGINES[name].releases if r.version == version), None)


def status(name: str, version: str, feature: str) -> tuple[Status, str]:
    """What the catalog says about ``feature`` in ``version``, and why (untested when no fact covers it)."""
    facts = _covering(ENGINES[name], version, feature)
    return (facts[0].status, facts[0].source) if facts else ("untested", NO_SOURCE)


def fixed_in(name: str, version: str, feature: str) -> str | None:
    """The first release after ``version`` in which ``feature`` is not broken (None: none yet)."""
    later = [r.version for r in ENGINES[name].releases if key(r.version) > key(version)]
    return next((v for v in later if status(name, v, feature)[0] != "broken"), None)


def broken(name: str, version: str, features: Iterable[str]) -> list[str]:
    return [f for f in features if status(name, version, f)[0] == "broken"]


def newest_passing(name: str, features: Iterable[str] = ()) -> Release:
    """The newest release in which none of ``features`` is broken."""
    wanted = tuple(features)
    for candidate in reversed(ENGINES[name].releases):
        if not broken(name, candidate.version, wanted):
            return candidate
    raise LookupError(f"no {name} release runs {', '.join(wanted)}")


def image_ref(name: str, version: str) -> str:
    """``<image>:v<version>``, with its digest where images.json pins one."""
    return images.pinned(ENGINES[name].image, f"v{version}")


def version_of_image(name: str, reference: str) -> str | None:
    """The release an image reference of ``name``'s repository names by tag (None: another image or tag)."""
    parsed = images.parse(reference)
    if parsed is None or parsed.repository != ENGINES[name].image or parsed.tag is None:
        return None
    tag = parsed.tag.removeprefix("v")
    return tag if release(name, tag) is not None else None
