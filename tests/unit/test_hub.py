"""`model.hf_id`: config.json from the Hugging Face cache or the Hub, with no test reaching the network.

Cache tests build a Hub cache in tmp_path laid out as huggingface_hub reads it (refs/main holds the commit,
snapshots/<commit>/config.json the file). Download tests run a fake Hub on 127.0.0.1 that answers as the
Hub does (X-Repo-Commit, ETag, X-Error-Code), so huggingface_hub writes the cache itself.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from huggingface_hub import constants
from typer.testing import CliRunner

from gpuplan.catalog import hub
from gpuplan.catalog.hf_config import arch_from_hf_config
from gpuplan.catalog.loader import _hub_cache, resolve_model
from gpuplan.cli import app
from gpuplan.core.sizing.params import count_params
from gpuplan.errors import HubUnavailableError, InputError
from gpuplan.schema.project import ModelRef
from tests.conftest import hf_config

COMMIT = "0123456789abcdef0123456789abcdef01234567"
HF_ID = "acme/tiny-llama"  # not a preset


def put_in_cache(cache: Path, hf_id: str, config: dict, commit: str = COMMIT) -> Path:
    """config.json for `hf_id` at revision main, as huggingface_hub lays out its cache."""
    repo = cache / ("models--" + hf_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)  # read back with no strip: no newline
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    path = snapshot / "config.json"
    path.write_text(json.dumps(config))
    return path


@pytest.fixture
def offline_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Hub cache, set as HF_HUB_CACHE, with offline mode on."""
    cache = tmp_path / "hub-cache"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


def test_cached_config_resolves_offline(offline_cache: Path) -> None:
    cfg = hf_config("llama-3-8b")
    path = put_in_cache(offline_cache, HF_ID, cfg)
    resolved = resolve_model(ModelRef(hf_id=HF_ID))
    assert count_params(resolved.arch).total == count_params(arch_from_hf_config(cfg)).total == 8_030_261_248
    assert resolved.name == HF_ID and resolved.origin == f"hf_id:{HF_ID}"
    assert resolved.source == f"Hugging Face Hub config.json (cache: {path.resolve()})"


def test_fetch_config_says_where(offline_cache: Path, tmp_path: Path) -> None:
    cfg = hf_config("mistral-7b")
    other = tmp_path / "elsewhere"
    put_in_cache(other, HF_ID, cfg)
    got, where = hub.fetch_config(HF_ID, cache_dir=other)  # an explicit cache_dir wins over HF_HUB_CACHE
    assert got == cfg and where.startswith("cache: ") and str(other.resolve()) in where


def test_missing_offline_names_the_cache(offline_cache: Path) -> None:
    with pytest.raises(HubUnavailableError) as info:
        resolve_model(ModelRef(hf_id="acme/not-cached"))
    message = str(info.value)
    assert str(offline_cache.resolve()) in message and "model.hf_config" in message
    assert hub.REASON_OFFLINE in message and info.value.code == "hub-unavailable"
    assert info.value.cache_path == str(offline_cache.resolve())


def test_hub_cache_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    assert _hub_cache() == str((tmp_path / "hf-home" / "hub").resolve())
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "c"))
    assert _hub_cache() == hub.hub_cache_dir() == str((tmp_path / "c").resolve())


def test_preset_hf_id_needs_no_cache(offline_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_hub(*args: object, **kwargs: object) -> None:
        raise AssertionError("a preset must not touch the Hub or its cache")

    monkeypatch.setattr(hub, "fetch_config", no_hub)
    resolved = resolve_model(ModelRef(hf_id="meta-llama/Llama-3.1-8B"))
    assert resolved.origin.startswith("preset:") and list(offline_cache.iterdir()) == []


def test_bad_cached_file_names_it(offline_cache: Path) -> None:
    path = put_in_cache(offline_cache, HF_ID, {})
    path.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON") as info:
        hub.fetch_config(HF_ID)
    assert str(path.resolve()) in str(info.value)


def test_unsupported_cached_model_type(offline_cache: Path) -> None:
    put_in_cache(offline_cache, HF_ID, {"model_type": "not-a-real-type"})
    with pytest.raises(InputError) as info:
        resolve_model(ModelRef(hf_id=HF_ID))
    assert info.value.code == "unsupported-model" and HF_ID in str(info.value)


def test_estimate_cli_with_hf_id(offline_cache: Path, tmp_path: Path) -> None:
    put_in_cache(offline_cache, HF_ID, hf_config("llama-3-8b"))
    project = tmp_path / "p.yaml"
    project.write_text(f"model: {{hf_id: {HF_ID}}}\n"
                       "workload: {task: inference, batch_size: 1, context_length: 2048}\n")
    env = {"HF_HUB_CACHE": str(offline_cache), "HF_HUB_OFFLINE": "1"}
    r = CliRunner().invoke(app, ["estimate", str(project), "--format", "json"], env=env)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["model"]["parameters"] == 8_030_261_248


def test_estimate_cli_uncached_is_one_line(offline_cache: Path, tmp_path: Path) -> None:
    project = tmp_path / "p.yaml"
    project.write_text("model: {hf_id: acme/not-cached}\nworkload: {task: inference}\n")
    env = {"HF_HUB_CACHE": str(offline_cache), "HF_HUB_OFFLINE": "1"}
    r = CliRunner().invoke(app, ["estimate", str(project)], env=env)
    assert r.exit_code != 0 and "Traceback" not in r.output
    assert str(offline_cache.resolve()) in r.output.replace("\n", "")


# ------------------------------------------------------------------------------------- a fake Hub on 127.0.0.1

class FakeHub(BaseHTTPRequestHandler):
    """Answers /<org>/<name>/resolve/main/config.json as huggingface.co does, from `repos`."""

    repos: dict[str, tuple[int, dict[str, str], bytes]] = {}
    seen_auth: list[str | None] = []

    def _answer(self, with_body: bool) -> None:
        repo = self.path.split("/resolve/")[0].strip("/")
        status, headers, body = self.repos.get(repo, (401, {"X-Error-Code": "RepoNotFound"}, b""))
        self.seen_auth.append(self.headers.get("Authorization"))
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if with_body:
            self.wfile.write(body)

    def do_HEAD(self) -> None:
        self._answer(False)

    def do_GET(self) -> None:
        self._answer(True)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def fake_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if constants.HF_HUB_OFFLINE:
        pytest.skip("huggingface_hub was imported with HF_HUB_OFFLINE set: it refuses every request")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    body = json.dumps(hf_config("llama-3-8b")).encode()
    FakeHub.repos = {
        "acme/fetched": (200, {"X-Repo-Commit": COMMIT, "ETag": '"etag-config"'}, body),
        "acme/gated": (401, {"X-Error-Code": "GatedRepo"}, b""),
        "acme/forbidden": (403, {}, b""),
        "acme/gguf-only": (404, {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": COMMIT}, b""),
    }
    FakeHub.seen_auth = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeHub)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_download_caches_then_works_offline(fake_hub: str, tmp_path: Path) -> None:
    cfg, where = hub.fetch_config("acme/fetched", endpoint=fake_hub, offline=False)
    assert cfg == hf_config("llama-3-8b") and where == "hub"
    again, where = hub.fetch_config("acme/fetched", endpoint="http://127.0.0.1:9", offline=True)
    assert again == cfg and where.startswith(f"cache: {(tmp_path / 'hub-cache').resolve()}")


@pytest.mark.parametrize(("repo", "reason"), [
    ("acme/gated", hub.REASON_GATED),
    ("acme/forbidden", hub.REASON_GATED),
    ("acme/missing", hub.REASON_NOT_FOUND),
    ("acme/gguf-only", hub.REASON_NO_CONFIG),
])
def test_hub_errors_say_why(fake_hub: str, repo: str, reason: str) -> None:
    with pytest.raises(HubUnavailableError) as info:
        hub.fetch_config(repo, endpoint=fake_hub, offline=False)
    assert reason in str(info.value) and "model.hf_config" in str(info.value)


def test_token_is_sent(fake_hub: str, monkeypatch: pytest.MonkeyPatch) -> None:
    hub.fetch_config("acme/fetched", endpoint=fake_hub, offline=False, token="hf_given")
    assert FakeHub.seen_auth and set(FakeHub.seen_auth) == {"Bearer hf_given"}
    FakeHub.seen_auth.clear()
    monkeypatch.setenv("HF_TOKEN", "hf_from_env")
    with pytest.raises(HubUnavailableError):
        hub.fetch_config("acme/gated", endpoint=fake_hub, offline=False)
    assert FakeHub.seen_auth == ["Bearer hf_from_env"]


def test_unreachable_hub_is_quick_and_clear(fake_hub: str) -> None:
    with pytest.raises(HubUnavailableError, match="not reachable"):
        hub.fetch_config("acme/elsewhere", endpoint="http://127.0.0.1:9", offline=False)  # port 9: refused


def test_invalid_hub_id(offline_cache: Path) -> None:
    with pytest.raises(InputError, match="not a valid Hub id"):
        resolve_model(ModelRef(hf_id="acme/a..b"))


def test_estimate_hf_option_alone_and_over_a_project(monkeypatch, tmp_path) -> None:
    """`gpuplan estimate --hf ID`: alone it sizes serving the model; with a project it replaces its model."""
    import json as _json

    from typer.testing import CliRunner

    from gpuplan.cli import app

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    runner = CliRunner()
    res = runner.invoke(app, ["estimate", "--hf", "meta-llama/Llama-3.1-8B", "--format", "json"])
    assert res.exit_code == 0, res.output
    data = _json.loads(res.output)
    assert data["workload"]["task"] == "inference" and data["model"]["parameters"] == 8_030_261_248
    res = runner.invoke(app, ["estimate", "--example", "llama3-8b-qlora", "--hf", "Qwen/Qwen2.5-7B",
                              "--format", "json"])
    assert res.exit_code == 0, res.output
    data = _json.loads(res.output)
    assert data["model"]["model_type"] == "qwen2" and data["workload"]["task"] == "qlora"
    res = runner.invoke(app, ["estimate", "--hf", "acme/not-cached"])
    assert res.exit_code == 2 and str(tmp_path) in res.output
