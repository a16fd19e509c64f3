"""A workflow's image and video steps and its vision step: pier asks the
provider through its model gateway, as for a chat step (the gateway holds the
key, counts each request against the run's budget, and the usage a provider
reports), with the provider's own SDK: `openai` and `anthropic` for vision and
OpenAI's images, `google-genai` for Gemini's, `replicate` for Replicate's.

What a provider makes is stored as the run's files (`<step>.<nnnn>.<ext>`
under the run's storage path) and named in the step's outputs
(`images[i].path`, `videos[i].path`, `files[i].path`), which a later step
(a vision step's `image_path_expr`, a judge's item) reads by that path."""

from __future__ import annotations

import base64
import mimetypes
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import httpx

from pier.agents.providers import ProviderChoice, choose_provider
from pier.agents.upstreams import Upstreams
from pier.errors import InputError, NotFoundError, PierError
from pier.gateway.grants import Budget, Grant
from pier.outbound import OutboundPolicy

GRANT_TTL_S = 1800.0
CALL_TIMEOUT_S = 600.0
MAX_MEDIA_BYTES = 256 << 20  # one file a provider made, at most
MAX_IMAGE_IN_BYTES = 20 << 20  # one image sent to a vision model, at most
IMAGE_TYPES = ("image/png", "image/jpeg", "image/webp", "image/gif")


class MediaError(PierError):
    """The provider refused or failed the step's call, or what it made could not be stored."""


@dataclass(frozen=True)
class Made:
    data: bytes
    content_type: str


def choose(provider: str, model: str, env: Mapping[str, str], upstreams: Upstreams | None,
           operator_keys: frozenset[str]) -> ProviderChoice:  # fmt: skip
    """The activity's provider, its key and its endpoint (InputError naming the variable)."""
    try:
        return choose_provider(
            "litellm", (provider,), provider, provider, model, env, upstreams, operator_keys
        )
    except InputError as exc:
        raise InputError(str(exc).replace("agent litellm", f"model {model}", 1)) from None


@dataclass
class Route:
    """Where one call goes: the gateway's stand-in for the provider (and its token), or the provider."""

    base_url: str
    key: str
    grant: Grant | None
    allowed: OutboundPolicy | None  # where the files a provider names may be fetched from

    def usage(self, reported: Mapping[str, Any] | None = None) -> dict[str, Any]:
        if self.grant is not None:
            return self.grant.usage()
        return dict(reported or {"requests": 1})

    def refused(self) -> str | None:
        return self.grant.refused if self.grant is not None else None


@contextmanager
def route(trajectory_id: str, choice: ProviderChoice, gateway: Any | None, budget: Budget,
          policy: OutboundPolicy | None) -> Iterator[Route]:  # fmt: skip
    allowed = replace(policy, allowed=(*policy.allowed, *choice.upstream_allowed)) if policy else None
    if allowed is not None:  # the gateway judges it again when it connects
        upstream = httpx.URL(choice.base_url)
        try:
            allowed.resolve(upstream.host, upstream.port or (443 if upstream.scheme == "https" else 80),
                            choice.provider.base_url_env)  # fmt: skip
        except OSError as exc:
            raise MediaError(f"{choice.name} endpoint {choice.base_url} does not resolve: {exc}") from None
    if gateway is None:
        yield Route(choice.base_url, choice.key, None, allowed)
        return
    grant = gateway.open(trajectory_id, choice.name, choice.key, choice.base_url, budget, GRANT_TTL_S,
                         allowed=choice.upstream_allowed)  # fmt: skip
    try:
        yield Route(gateway.base_url(grant), grant.token, grant, allowed)
    finally:
        gateway.close(grant)


def failed(choice: ProviderChoice, model: str, road: Route, exc: Exception) -> MediaError:
    refused = road.refused()
    if refused:
        return MediaError(f"the model budget was used up ({refused}): raise init_params.model_budget")
    return MediaError(f"{choice.name} {model}: {type(exc).__name__}: {exc}")


# vision


def image_part(data: bytes, content_type: str) -> str:
    return f"data:{content_type};base64,{base64.b64encode(data).decode()}"


def vision_messages(system: str | None, prompt: str, image: str) -> list[dict[str, Any]]:
    """OpenAI's chat messages with one image (a data: URI or an http(s) URL)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": [
        {"type": "text", "text": prompt}, {"type": "image_url", "image_url": {"url": image}}]})  # fmt: skip
    return messages


def anthropic_content(prompt: str, image: str) -> list[dict[str, Any]]:
    if image.startswith("data:"):
        head, _, data = image.partition(",")
        media = head.removeprefix("data:").split(";", 1)[0]
        source: dict[str, Any] = {"type": "base64", "media_type": media, "data": data}
    else:
        source = {"type": "url", "url": image}
    return [{"type": "image", "source": source}, {"type": "text", "text": prompt}]


def read_stored_image(storage: Any, collection: str, path: str, scratch: Any, own_prefix: str) -> Made:
    """The bytes of a stored file of `collection` (a run's own file not yet
    published is read from its scratch folder). NotFoundError-like MediaError otherwise."""
    from pier.lifecycle.files import resolve_api_path

    own = (
        path.removeprefix(own_prefix.rstrip("/") + "/")
        if path.startswith(own_prefix.rstrip("/") + "/")
        else None
    )
    if own is not None and scratch is not None and (scratch / own).is_file() and "/" not in own:
        data = (scratch / own).read_bytes()
    else:
        try:
            found = resolve_api_path(storage, collection, path)
        except NotFoundError as exc:
            raise MediaError(str(exc)) from None
        if found.size > MAX_IMAGE_IN_BYTES:
            raise MediaError(
                f"{path} is {found.size} bytes, more than a vision step sends ({MAX_IMAGE_IN_BYTES})"
            )
        with storage.open(found.key) as stream:
            data = stream.read(MAX_IMAGE_IN_BYTES + 1)
    kind = mimetypes.guess_type(path)[0] or ""
    if kind not in IMAGE_TYPES:
        raise MediaError(f"{path} is not an image a vision model reads (png, jpeg, webp, gif)")
    return Made(data, kind)


# what providers make


def fetch(url: str, policy: OutboundPolicy | None) -> Made:
    """A file a provider names by URL (a data: URI is decoded), fetched where the
    outbound policy (with the provider's own endpoints) lets pier connect."""
    if url.startswith("data:"):
        head, _, data = url.partition(",")
        kind = head.removeprefix("data:").split(";", 1)[0] or "application/octet-stream"
        raw = base64.b64decode(data) if ";base64" in head else data.encode()
        return Made(raw, kind)
    target = httpx.URL(url)
    if target.scheme not in ("http", "https"):
        raise MediaError(f"the provider named its output {url[:100]!r}, not an http(s) URL")
    if policy is not None:
        try:
            policy.resolve(target.host, target.port or (443 if target.scheme == "https" else 80), "output")
        except OSError as exc:
            raise MediaError(f"the provider's output {target.host} could not be fetched: {exc}") from None
    with (
        httpx.Client(timeout=CALL_TIMEOUT_S, follow_redirects=False) as client,
        client.stream("GET", target) as got,
    ):
        if got.status_code != 200:
            raise MediaError(f"the provider's output {url[:100]} answered {got.status_code}")
        chunks, size = [], 0
        for chunk in got.iter_bytes():
            size += len(chunk)
            if size > MAX_MEDIA_BYTES:
                raise MediaError(f"the provider's output {url[:100]} is more than {MAX_MEDIA_BYTES} bytes")
            chunks.append(chunk)
        kind = got.headers.get("content-type", "").split(";", 1)[0].strip()
    return Made(b"".join(chunks), kind or mimetypes.guess_type(target.path)[0] or "application/octet-stream")


def urls_in(output: Any) -> list[str]:
    """The file URLs in a Replicate output (a URL, a list of them, or a mapping holding them)."""
    if isinstance(output, str):
        return [output] if output.startswith(("http://", "https://", "data:")) else []
    if isinstance(output, list):
        return [u for item in output for u in urls_in(item)]
    if isinstance(output, Mapping):
        return [u for item in output.values() for u in urls_in(item)]
    return []


def replicate_run(road: Route, model: str, inputs: dict[str, Any]) -> Any:
    import replicate

    # replicate annotates timeout as httpx.Timeout, but hands it on to httpx, which takes seconds too
    client = replicate.Client(api_token=road.key, base_url=road.base_url, timeout=CALL_TIMEOUT_S)  # type: ignore[arg-type]
    client.poll_interval = 0.5
    return client.run(model, input=inputs, use_file_output=False)


def gemini_images(road: Route, model: str, prompt: str) -> tuple[list[Made], str, dict[str, Any]]:
    from google import genai
    from google.genai import types

    client = genai.Client(
        api_key=road.key, http_options=types.HttpOptions(base_url=road.base_url, api_version="v1beta")
    )
    answer = client.models.generate_content(
        model=model,
        contents=prompt,
        config=types.GenerateContentConfig(response_modalities=["IMAGE", "TEXT"]),
    )
    made, text = [], []
    for candidate in answer.candidates or []:
        for part in (candidate.content.parts if candidate.content else None) or []:
            if part.inline_data is not None and part.inline_data.data:
                made.append(Made(part.inline_data.data, part.inline_data.mime_type or "image/png"))
            elif part.text:
                text.append(part.text)
    meta = answer.usage_metadata
    reported = (
        {"prompt_tokens": meta.prompt_token_count or 0, "completion_tokens": meta.candidates_token_count or 0}
        if meta
        else {}
    )
    return made, "".join(text), reported


def openai_images(road: Route, model: str, prompt: str, extra: dict[str, Any]) -> list[Made]:
    from openai import OpenAI

    with OpenAI(base_url=road.base_url, api_key=road.key, timeout=CALL_TIMEOUT_S, max_retries=1) as client:
        answer = client.images.generate(model=model, prompt=prompt, response_format="b64_json", **extra)
    made = []
    for item in answer.data or []:
        if item.b64_json:
            made.append(Made(base64.b64decode(item.b64_json), "image/png"))
        elif item.url:
            made.append(fetch(item.url, road.allowed))
    return made


def extension(content_type: str) -> str:
    known = {"image/jpeg": "jpg", "image/png": "png", "image/webp": "webp", "image/gif": "gif",
             "video/mp4": "mp4", "video/webm": "webm", "video/quicktime": "mov"}  # fmt: skip
    found = known.get(content_type) or (mimetypes.guess_extension(content_type) or ".bin").lstrip(".")
    return found
