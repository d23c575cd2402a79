"""Images pinned by tag and digest: the vendored catalog (components/catalog/images.json), every image the
rendered manifests and the Helm controllers reference, and the script that refreshes the digests from the
registries (run here against a fake OCI registry on 127.0.0.1; no outside network)."""

from __future__ import annotations

import datetime
import hashlib
import http.server
import json
import re
import threading
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.catalog import engine_releases as engines
from components.catalog import images, refresh_images
from components.catalog.images import IMAGES, ImagePin, image, parse, pin_of
from components.config import stack_files as stacks
from components.crds.releases import CONTROLLERS
from components.render import gateway
from components.tools import manifests
from components.workloads.jetstream.spec import CheckpointConversionSpec, JetstreamSpec
from components.workloads.maxtext_jobset import spec as maxtext_jobset_spec
from components.workloads.saxml.spec import SaxmlPublishSpec, SaxmlSpec
from components.workloads.vllm import disagg_render
from components.workloads.vllm.spec import ENGINE_DEFAULT, VllmSpec
from tests.conftest import STACKS, planned

DIGEST = re.compile(r"^sha256:[a-f0-9]{64}$")
RELEASE = "kubernetes:helm.sh/v3:Release"

UNRESOLVED = {
    "vllm-tpu:v0.32.0",
    "custom-metrics-stackdriver-adapter:v0.16.10-gke.0",
    "pathways-proxy:jax-0.5.3",
    "pathways-server:jax-0.5.3",
    "jetstream-pathways:v0.2.0",
    "jetstream-http:v0.2.3",
    "inference-checkpoint:v0.2.5",
    "sax-admin-server:v1.1.0",
    "sax-model-server:v1.1.0",
    "sax-http:v1.0.0",
    "lws:v0.9.0",
    "lws:v0.10.0",
    "llm-d-router-endpoint-picker:v0.10.0",
    "gaie-body-based-router:v1.5.0",
    "maxtext-tpu-pre-training:0.2.4",
    "llm-d-router-disagg-sidecar:v0.10.0",
}
"""Catalog rows whose digest no public source names (each row's ``source`` says where it was looked
for): they render by tag until ``python -m components.catalog.refresh_images`` is run where the
registries answer. Listed here so the gap is visible and cannot grow unnoticed; fill a digest and this
set must shrink with it."""


def image_refs(obj: Any) -> Iterator[str]:
    """Every ``image`` string in an object (containers, init containers, CRD pod templates)."""
    if isinstance(obj, Mapping):
        for key, value in obj.items():
            if key == "image" and isinstance(value, str):
                yield value
            else:
                yield from image_refs(value)
    elif isinstance(obj, list):
        for item in obj:
            yield from image_refs(item)


def golden_objects() -> Iterator[tuple[str, Any]]:
    for path in sorted(manifests.MANIFESTS_DIR.glob("*/*.yaml")):
        yield str(path.relative_to(stacks.ROOT)), yaml.safe_load(path.read_text())


# ---------------------------------------------------------------- the catalog


def test_every_row_has_a_source_a_date_and_a_digest_or_says_where_it_was_looked_for() -> None:
    assert IMAGES == images.load()
    for pin in IMAGES:
        assert pin.source.strip(), pin
        assert datetime.date.fromisoformat(pin.read) <= datetime.datetime.now(datetime.UTC).date(), pin
        if pin.digest is None:
            assert pin.source.startswith("not found:"), pin
            assert pin.ref == f"{pin.repository}:{pin.tag}"
        else:
            assert DIGEST.match(pin.digest), pin
            assert pin.ref == f"{pin.repository}:{pin.tag}@{pin.digest}"
            assert not pin.source.startswith("not found"), pin
    assert {f"{p.name}:{p.tag}" for p in IMAGES if p.digest is None} == UNRESOLVED


def _table(tmp_path: Path, rows: list[dict[str, Any]]) -> Path:
    path = tmp_path / "images.json"
    path.write_text(json.dumps({"images": rows}))
    return path


GOOD = {
    "name": "x",
    "repository": "example.com/team/x",
    "tag": "v1",
    "digest": "sha256:" + "a" * 64,
    "source": "s",
    "read": "2026-01-02",
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"digest": "sha256:ABC"}, "is not sha256:<64 lowercase hex>"),
        ({"digest": "a" * 64}, "is not sha256:<64 lowercase hex>"),
        ({"source": " "}, "source is empty"),
        ({"read": "2026-13-01"}, "is not a YYYY-MM-DD date"),
        ({"tag": "v1@sha256:" + "a" * 64}, "is not an image repository and tag"),
        ({"color": "blue"}, "unknown keys ['color']"),
    ],
)
def test_the_table_refuses_a_bad_row(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        images.load(_table(tmp_path, [{**GOOD, **change}]))


def test_the_table_refuses_an_image_twice_and_round_trips(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="listed twice"):
        images.load(_table(tmp_path, [GOOD, {**GOOD, "name": "y"}]))
    path = tmp_path / "copy.json"
    images.dump(IMAGES, path)
    assert images.load(path) == IMAGES
    assert path.read_text() == images.TABLE.read_text()  # the committed table is in the written format


def test_parse_splits_registry_ports_tags_and_digests() -> None:
    digest = "sha256:" + "c" * 64
    assert parse(f"127.0.0.1:5000/team/app:v1@{digest}") == images.Reference("127.0.0.1:5000/team/app", "v1", digest)
    assert parse("alpine:3") == images.Reference("alpine", "3", None)
    assert parse(f"vllm/vllm-tpu@{digest}") == images.Reference("vllm/vllm-tpu", None, digest)
    assert parse("Not An Image") is None


def test_lookups_name_the_catalog_tags_when_a_row_is_missing() -> None:
    assert image("jobset", "v0.12.0").digest == "sha256:e75536f1135b7bb2f19f8c3b620782fbdd9091d73398e3a272f9a5fed322980d"
    with pytest.raises(KeyError, match=re.escape("the catalog has tags ['v0.11.1', 'v0.12.0', 'v0.8.1']")):
        image("jobset", "v9.9.9")
    with pytest.raises(KeyError):
        image("jobset")  # several releases share the name: the tag is required
    assert images.pinned("vllm/vllm-tpu", "v0.27.0") == image("vllm-tpu-v0.27.0").ref
    assert images.pinned("vllm/vllm-tpu", "v0.99.0") == "vllm/vllm-tpu:v0.99.0"  # a user's tag, as given


# ---------------------------------------------------------------- what the project renders and installs


def test_spec_defaults_read_the_catalog() -> None:
    defaults = {
        engines.image_ref("vllm-tpu", ENGINE_DEFAULT.version): "vllm-tpu",
        JetstreamSpec().proxy_image: "pathways-proxy",
        JetstreamSpec().server_image: "pathways-server",
        JetstreamSpec().jetstream_image: "jetstream-pathways",
        JetstreamSpec().http_image: "jetstream-http",
        JetstreamSpec().wait_image: "google-cloud-cli-slim",
        CheckpointConversionSpec().image: "inference-checkpoint",
        SaxmlSpec().admin_server_image: "sax-admin-server",
        SaxmlSpec().model_server_image: "sax-model-server",
        SaxmlSpec().http_server_image: "sax-http",
        SaxmlPublishSpec().image: "curl",
    }
    for ref, name in defaults.items():
        assert ref == image(name).ref
    assert VllmSpec().metrics_adapter_version == image("custom-metrics-stackdriver-adapter").tag


def test_image_strings_live_only_in_the_catalog() -> None:
    # One place per fact: no module repeats a catalog image as repository:tag (or its digest).
    sources = {p: p.read_text() for p in (stacks.ROOT / "components").rglob("*.py")}
    for pin in IMAGES:
        for path, text in sources.items():
            assert f"{pin.repository}:{pin.tag}" not in text, (pin.name, path)
            assert pin.digest is None or pin.digest not in text, (pin.name, path)


def test_every_row_is_used_by_a_default_or_a_controller_release() -> None:
    used = {image(name) for name in ("vllm-tpu", "custom-metrics-stackdriver-adapter", "curl")}
    # Older vLLM TPU releases a stack may pin (workload.vllm.engineVersion), by digest where the catalog has one.
    used |= {pin for v in engines.versions("vllm-tpu") if (pin := pin_of("vllm/vllm-tpu", f"v{v}")) is not None}
    used |= {
        pin
        for spec in (JetstreamSpec(), CheckpointConversionSpec(), SaxmlSpec())
        for ref in spec.model_dump().values()
        if isinstance(ref, str) and (parsed := parse(ref)) is not None and parsed.tag is not None
        for pin in [pin_of(parsed.repository, parsed.tag)]
        if pin is not None
    }
    used |= {controller.image(version) for controller in CONTROLLERS.values() for version in controller.versions}
    used |= {image(gateway.EPP_CHART.image), image(gateway.BBR_CHART.image), image(maxtext_jobset_spec.IMAGE_NAME)}
    used |= {image(disagg_render.SIDECAR_IMAGE)}
    assert set(IMAGES) - used == set()


@pytest.mark.parametrize("stack", STACKS)
def test_every_image_in_the_rendered_manifests_is_the_catalogs_by_tag_and_digest(stack: str) -> None:
    refs = sorted({ref for obj in planned(stack).manifests for ref in image_refs(obj)})
    assert refs or stack.startswith("llama3-8b-train")  # the training stacks wait for their build
    for ref in refs:
        parsed = parse(ref)
        assert parsed is not None, ref
        assert parsed.tag is not None, f"{stack}: {ref} has no tag (the reader needs one)"
        pin = pin_of(parsed.repository, parsed.tag)
        assert pin is not None, f"{stack}: {ref} is not in components/catalog/images.json"
        assert ref == pin.ref, f"{stack}: {ref} is not the catalog's {pin.ref}"
        if f"{pin.name}:{pin.tag}" not in UNRESOLVED:
            assert parsed.digest is not None, ref
            assert DIGEST.match(parsed.digest), ref


def test_every_image_in_manifests_carries_a_digest_but_the_listed_gaps() -> None:
    # The committed goldens (what the acceptance reads): a digest on every image, except the
    # rows no public source could pin (UNRESOLVED), which carry exactly the catalog's tag.
    seen: set[str] = set()
    for where, obj in golden_objects():
        for ref in image_refs(obj):
            parsed = parse(ref)
            assert parsed is not None, (where, ref)
            if parsed.digest is None:
                assert parsed.tag is not None, (where, ref)
                pin = pin_of(parsed.repository, parsed.tag)
                assert pin is not None, (where, ref)
                assert pin.digest is None, (where, ref)
                seen.add(f"{pin.name}:{pin.tag}")
            else:
                assert DIGEST.match(parsed.digest), (where, ref)
    assert seen <= UNRESOLVED


def test_controller_releases_pin_their_image_by_tag_and_digest() -> None:
    for controller in CONTROLLERS.values():
        assert controller.image_values, f"{controller.name}: the release would run the chart's default image"
        for version in controller.versions:
            values: Any = controller.helm_values(version)
            for key in controller.image_values:
                values = values[key]
            pin = controller.image(version)
            assert values == {"repository": pin.repository, "tag": pin.tag_and_digest}
            rendered = f"{values['repository']}:{values['tag']}"  # the charts' "{{ repository }}:{{ tag }}"
            assert rendered == pin.ref
            assert pin.tag == f"v{version}"
            if f"{pin.name}:{pin.tag}" not in UNRESOLVED:
                assert parse(rendered) == images.Reference(pin.repository, pin.tag, pin.digest)
                assert pin.digest is not None
    # Kueue keeps its manager configuration beside the image.
    assert set(CONTROLLERS["kueue"].helm_values("0.19.2")) == {"managerConfig", "controllerManager"}


def test_the_releases_the_stacks_install_carry_the_pinned_image() -> None:
    releases = 0
    for stack in STACKS:
        result = planned(stack)
        for release in (r for r in result.resources if r.type == RELEASE):
            releases += 1
            controller = CONTROLLERS[release.inputs["name"]]
            assert release.inputs["values"] == controller.helm_values(release.inputs["version"])
            assert controller.image(release.inputs["version"]).tag_and_digest in json.dumps(release.inputs["values"])
    assert releases  # LWS, JobSet and Kueue are installed by the committed stacks


# ---------------------------------------------------------------- the refresh script, against a fake registry


@dataclass
class FakeRegistry:
    """An OCI registry on 127.0.0.1 that wants an anonymous bearer token first, like Docker Hub and gcr.io."""

    manifests: dict[tuple[str, str], bytes]
    digest_header: bool = True
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    token: str = "anonymous-pull-token"
    port: int = 0

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"


def _handler(registry: FakeRegistry) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _manifest(self, body: bool) -> None:
            registry.requests.append((self.command, self.path, dict(self.headers)))
            match = re.fullmatch(r"/v2/(?P<name>.+)/manifests/(?P<tag>[^/]+)", self.path)
            if match is None:
                self.send_error(404)
                return
            if self.headers.get("Authorization") != f"Bearer {registry.token}":
                self.send_response(401)
                realm = f"http://{registry.host}/token"
                scope = f"repository:{match['name']}:pull"
                self.send_header("WWW-Authenticate", f'Bearer realm="{realm}",service="fake-registry",scope="{scope}"')
                self.end_headers()
                return
            accept = self.headers.get("Accept", "")
            if "application/vnd.oci.image.index.v1+json" not in accept or "manifest.list.v2+json" not in accept:
                self.send_error(406)  # a client that cannot take an index would get one platform's manifest
                return
            content = registry.manifests.get((match["name"], match["tag"]))
            if content is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.oci.image.index.v1+json")
            if registry.digest_header:
                self.send_header("Docker-Content-Digest", "sha256:" + hashlib.sha256(content).hexdigest())
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            if body:
                self.wfile.write(content)

        def do_HEAD(self) -> None:
            self._manifest(body=False)

        def do_GET(self) -> None:
            if self.path.startswith("/token?"):
                registry.requests.append((self.command, self.path, dict(self.headers)))
                query = urllib.parse.parse_qs(self.path.partition("?")[2])
                if query.get("service") != ["fake-registry"] or not query.get("scope", [""])[0].endswith(":pull"):
                    self.send_error(400)
                    return
                payload = json.dumps({"token": registry.token}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return
            self._manifest(body=True)

    return Handler


@pytest.fixture
def registry() -> Iterator[FakeRegistry]:
    fake = FakeRegistry(manifests={})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    fake.port = server.server_address[1]
    # shutdown() waits for serve_forever's next poll (every 0.5 s by default).
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield fake
    server.shutdown()
    server.server_close()
    thread.join()


def _sha(content: bytes) -> str:
    return "sha256:" + hashlib.sha256(content).hexdigest()


def _rows(host: str) -> list[ImagePin]:
    old = "sha256:" + "0" * 64
    return [
        ImagePin("moved", f"{host}/team/app", "v1", old, "a public source", "2026-01-01"),
        ImagePin("found", f"{host}/team/new", "v2", None, "not found: nowhere", "2026-01-01"),
        ImagePin("same", f"{host}/team/same", "v3", _sha(b'{"same": 3}'), "a public source", "2026-01-01", note="why"),
    ]


def test_refresh_rewrites_the_table_from_the_registry(
    registry: FakeRegistry, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app, new, same = b'{"app": 1}', b'{"new": 2}', b'{"same": 3}'
    registry.manifests = {("team/app", "v1"): app, ("team/new", "v2"): new, ("team/same", "v3"): same}
    table = tmp_path / "images.json"
    images.dump(_rows(registry.host), table)
    assert refresh_images.main(["--table", str(table)]) == 0
    out = capsys.readouterr().out
    assert f"~ {registry.host}/team/app:v1 sha256:{'0' * 64} -> {_sha(app)}" in out
    assert f"+ {registry.host}/team/new:v2 (none) -> {_sha(new)}" in out
    assert f"= {registry.host}/team/same:v3 {_sha(same)}" in out
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    rows = {pin.name: pin for pin in images.load(table)}
    for name, path, content in (("moved", "team/app/manifests/v1", app), ("found", "team/new/manifests/v2", new)):
        assert rows[name].digest == _sha(content)
        assert rows[name].source == f"http://{registry.host}/v2/{path}"
        assert rows[name].read == today
    assert rows["same"].note == "why"  # kept
    assert rows["same"].source == f"http://{registry.host}/v2/team/same/manifests/v3"  # now confirmed by the registry
    # Each image: a HEAD refused with a bearer challenge, an anonymous token, the HEAD again with it.
    methods = [(method, path.partition("?")[0]) for method, path, _ in registry.requests]
    assert methods[:3] == [("HEAD", "/v2/team/app/manifests/v1"), ("GET", "/token"), ("HEAD", "/v2/team/app/manifests/v1")]
    (token_request,) = [r for r in registry.requests if r[1].startswith("/token?")][:1]
    assert "scope=repository%3Ateam%2Fapp%3Apull" in token_request[1]


def test_refresh_check_writes_nothing_and_exits_1_on_a_change(registry: FakeRegistry, tmp_path: Path) -> None:
    registry.manifests = {("team/app", "v1"): b"1", ("team/new", "v2"): b"2", ("team/same", "v3"): b'{"same": 3}'}
    table = tmp_path / "images.json"
    images.dump(_rows(registry.host), table)
    before = table.read_text()
    assert refresh_images.main(["--table", str(table), "--check"]) == 1
    assert table.read_text() == before
    assert refresh_images.main(["--table", str(table), "--check", "--only", "same"]) == 0


def test_refresh_hashes_the_manifest_when_the_registry_sends_no_digest(registry: FakeRegistry, tmp_path: Path) -> None:
    registry.digest_header = False
    registry.manifests = {("team/app", "v1"): b'{"schemaVersion": 2}'}
    table = tmp_path / "images.json"
    images.dump([_rows(registry.host)[0]], table)
    assert refresh_images.main(["--table", str(table)]) == 0
    (pin,) = images.load(table)
    assert pin.digest == _sha(b'{"schemaVersion": 2}')
    assert ("GET", "/v2/team/app/manifests/v1") in [(m, p) for m, p, _ in registry.requests]


def test_refresh_fails_whole_on_an_unknown_tag(
    registry: FakeRegistry, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    registry.manifests = {("team/app", "v1"): b"1", ("team/same", "v3"): b'{"same": 3}'}  # no team/new:v2
    table = tmp_path / "images.json"
    images.dump(_rows(registry.host), table)
    before = table.read_text()
    assert refresh_images.main(["--table", str(table)]) == 2
    err = capsys.readouterr().err
    assert f"{registry.host}/team/new:v2: http://{registry.host}/v2/team/new/manifests/v2: the tag does not exist" in err
    assert "1 of 3 images not read" in err
    assert table.read_text() == before  # nothing half-refreshed


def test_refresh_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert refresh_images.main(["--only", "nope", "--table", str(images.TABLE)]) == 2
    assert "--only nope: no such row; the table has " in capsys.readouterr().err
    assert refresh_images.main(["--table", str(tmp_path / "missing.json")]) == 2
    assert "--table" in capsys.readouterr().err


def test_refresh_reports_an_unreachable_registry(tmp_path: Path) -> None:
    # A port nothing listens on (bound, then closed): connection refused, reported per image.
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    rows, lines, errors = refresh_images.refresh([replace(_rows(f"127.0.0.1:{port}")[0])], today="2026-11-26", timeout=5)
    assert lines == []
    assert rows == [_rows(f"127.0.0.1:{port}")[0]]
    (error,) = errors
    assert "unreachable" in error


def test_locate_finds_each_registry_and_docker_hubs_names() -> None:
    assert refresh_images.locate("vllm/vllm-tpu") == refresh_images.Location("registry-1.docker.io", "vllm/vllm-tpu")
    assert refresh_images.locate("alpine") == refresh_images.Location("registry-1.docker.io", "library/alpine")
    gcr = refresh_images.locate("gcr.io/google.com/cloudsdktool/google-cloud-cli")
    assert gcr == refresh_images.Location("gcr.io", "google.com/cloudsdktool/google-cloud-cli")
    assert gcr.manifest_url("562.0.0-slim") == "https://gcr.io/v2/google.com/cloudsdktool/google-cloud-cli/manifests/562.0.0-slim"
    assert refresh_images.locate("registry.k8s.io/kueue/kueue").manifest_url("v1") == "https://registry.k8s.io/v2/kueue/kueue/manifests/v1"
    assert refresh_images.locate("localhost:5000/x").scheme == "http"
    assert refresh_images.locate("127.0.0.1:5000/x").scheme == "http"
    assert refresh_images.locate("us-docker.pkg.dev/cloud-tpu-images/inference/sax-http").scheme == "https"
    for pin in IMAGES:  # every row resolves to a registry over HTTPS
        assert refresh_images.locate(pin.repository).scheme == "https", pin
