"""Hugging Face Hub models (`model.hf_id: org/name`): the repository's `config.json`, from the local
Hugging Face cache or, when online, from the Hub (which also stores it in that cache).

Order, so that a model used once keeps working offline:

1. the cache (`hf_hub_download(..., local_files_only=True)`: no network at all);
2. unless offline (`HF_HUB_OFFLINE=1`, or `offline=True`), one HEAD request with a short timeout
   (HUB_TIMEOUT_S, no retries) that tells "gated", "no such model" and "no network" apart quickly, then
   the download itself. The pre-flight HEAD is there because `hf_hub_download`, when the network is down
   and the file is not cached, retries with a 60 s timeout and back-off; one extra HEAD is cheaper than a
   minute's wait.

The cache folder is the one huggingface_hub uses (`HF_HUB_CACHE`, else `HF_HOME/hub`, else
`~/.cache/huggingface/hub`), read from the environment at call time: huggingface_hub's own constants are
read once, at import. The token is `token` if given, else huggingface_hub's own (`HF_TOKEN`, then the file
`hf auth login` writes).

Exact parameter counts come from the config through gpuplan's own counters (core/sizing/params.py), which are
checked against transformers; the safetensors index's `total_size` is bytes of mixed dtypes, not a count,
so it is not fetched.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

from gpuplan.errors import HubUnavailableError, InputError

#: seconds to wait for the Hub to answer the HEAD request; the download itself uses huggingface_hub's
#: HF_HUB_DOWNLOAD_TIMEOUT (10 s unless set). A config.json is a few kB.
HUB_TIMEOUT_S = 10.0

CONFIG_FILE = "config.json"

REASON_GATED = "gated model: accept its licence on the Hub and set HF_TOKEN"
REASON_NOT_FOUND = "no such model on the Hub (a private one needs HF_TOKEN)"
REASON_NO_CONFIG = "the repository has no config.json"
REASON_OFFLINE = "not reachable (offline) and not in the cache"

_TRUE = {"1", "on", "yes", "true"}


def hub_cache_dir() -> str:
    """The Hub cache folder in use now, resolved as huggingface_hub resolves it."""
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "huggingface")
    path = (os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
            or os.path.join(os.path.expanduser(home), "hub"))
    return str(Path(os.path.expandvars(os.path.expanduser(path))).resolve())


def is_offline() -> bool:
    """HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is set now, or was when huggingface_hub was imported."""
    from huggingface_hub import constants

    env = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return env.strip().lower() in _TRUE or bool(constants.HF_HUB_OFFLINE)


def fetch_config(
    hf_id: str,
    *,
    cache_dir: str | Path | None = None,
    offline: bool | None = None,
    token: str | None = None,
    endpoint: str | None = None,
) -> tuple[dict[str, Any], str]:
    """A Hub model's config.json and where it came from: "cache: <path of the file>" or "hub".

    `cache_dir` defaults to hub_cache_dir(), `offline` to is_offline(), `token` to huggingface_hub's own,
    `endpoint` (a Hub mirror's URL) to huggingface_hub's (HF_ENDPOINT, else https://huggingface.co).

    Raises HubUnavailableError (naming the cache folder) when it is neither cached nor downloadable, and
    InputError when the id is not a valid Hub id or the file is not a JSON object.
    """
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url
    from huggingface_hub.utils import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        HFValidationError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
    )

    folder = str(Path(cache_dir).expanduser().resolve()) if cache_dir is not None else hub_cache_dir()
    offline = is_offline() if offline is None else offline

    def unavailable(reason: str) -> HubUnavailableError:
        return HubUnavailableError(hf_id, folder, reason)

    try:
        path = hf_hub_download(hf_id, CONFIG_FILE, cache_dir=folder, local_files_only=True)
        return _read_config(Path(path)), f"cache: {path}"
    except HFValidationError as exc:
        raise InputError(["model", "hf_id"], f"{hf_id!r} is not a valid Hub id: {exc}") from None
    except (LocalEntryNotFoundError, OfflineModeIsEnabled):
        pass
    if offline:
        raise unavailable(REASON_OFFLINE)

    try:
        get_hf_file_metadata(hf_hub_url(hf_id, CONFIG_FILE, endpoint=endpoint), token=token,
                             timeout=HUB_TIMEOUT_S, endpoint=endpoint)
        path = hf_hub_download(hf_id, CONFIG_FILE, cache_dir=folder, token=token, etag_timeout=HUB_TIMEOUT_S,
                               endpoint=endpoint)
    except GatedRepoError:  # before RepositoryNotFoundError, its parent
        raise unavailable(REASON_GATED) from None
    except RepositoryNotFoundError:
        raise unavailable(REASON_NOT_FOUND) from None
    except (LocalEntryNotFoundError, OfflineModeIsEnabled):  # before EntryNotFoundError / OSError
        raise unavailable(REASON_OFFLINE) from None
    except EntryNotFoundError:
        raise unavailable(REASON_NO_CONFIG) from None
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        if status in (401, 403):
            raise unavailable(REASON_GATED) from None
        raise unavailable(f"the Hub answered HTTP {status} and it is not in the cache") from None
    except _network_errors() as exc:
        raise unavailable(f"{REASON_OFFLINE} ({type(exc).__name__}: {_first_line(exc)})") from None
    return _read_config(Path(path)), "hub"


def _read_config(path: Path) -> dict[str, Any]:
    from gpuplan.catalog import reading

    try:
        text = reading.read_text(path)
    except reading.Unreadable as exc:
        raise InputError([], exc.message, source=None if exc.reason else str(path)) from None
    try:
        data = reading.parse(text, "json")  # nesting, duplicate keys, NaN and huge numbers refused
    except reading.Unreadable as exc:
        raise InputError(exc.loc, exc.message, source=str(path)) from None
    if not isinstance(data, dict):
        raise InputError([], "a config.json must be a JSON object", source=str(path))
    return data


def _network_errors() -> tuple[type[BaseException], ...]:
    """OSError (requests' errors are OSErrors) and the base error of the HTTP client huggingface_hub uses."""
    errors: list[type[BaseException]] = [OSError]
    for module in ("httpx2", "httpx"):
        try:
            errors.append(importlib.import_module(module).HTTPError)
        except (ImportError, AttributeError):
            pass
    return tuple(errors)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "no detail"


__all__ = ["HUB_TIMEOUT_S", "hub_cache_dir", "fetch_config", "is_offline"]
