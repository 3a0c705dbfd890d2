"""Chat completions from OpenAI-compatible endpoints: configuration, retries, timeouts, concurrency bound.

One `EndpointClient` per endpoint wraps the official ``openai`` async client. The API key is read from
the environment variable the configuration names, handed to the ``openai`` client and kept nowhere
else: it is not an attribute, not in a repr, a log record or an error message. Retries on 408/409/429/5xx
and on connection errors and timeouts are the ``openai`` client's own (exponential backoff from 0.5 s,
doubling up to 8 s, minus up to 25% jitter; a server's ``Retry-After`` is honoured), so a request is
tried ``max_retries + 1`` times in all. A stream is retried only until its response starts: once text
has been handed out, a broken stream is an error, not a silent restart.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

import openai
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "SCHEMA_MODES",
    "Completion",
    "EndpointClient",
    "EndpointConfig",
    "EndpointError",
    "EndpointResponseError",
    "EndpointUnavailable",
    "Message",
    "SchemaMode",
]

#: What local servers get as a key when the configuration names no variable (the openai client needs one).
NO_KEY = "no-key"


class Message(TypedDict):
    """One chat turn in the OpenAI format."""

    role: Literal["system", "user", "assistant"]
    content: str


#: How a JSON schema goes to a server: OpenAI's ``json_schema``, llama-cpp-python's ``json_object``, or not
#: at all (``text``).
SchemaMode = Literal["json_schema", "json_object", "text"]
SCHEMA_MODES: tuple[SchemaMode, ...] = ("json_schema", "json_object", "text")


class EndpointConfig(BaseModel):
    """An OpenAI-compatible endpoint as Arena knows it: where it is, which model, how to sample.

    ``name`` is Arena's name for the endpoint and the one errors use. ``api_key_env`` names the
    environment variable holding the key (None for servers without one). ``json_schema_mode`` picks
    how a JSON schema is sent: ``"json_schema"`` is OpenAI's ``response_format`` (OpenAI, vLLM,
    Ollama, llama.cpp's ``llama-server``); ``"json_object"`` is ``{"type": "json_object", "schema": ...}``,
    the only form llama-cpp-python's server understands; ``"text"`` sends no ``response_format`` at all
    (for a server that takes neither: the caller reads the answer as free text). ``arena judge`` finds the
    mode a server takes by itself and records it here. ``extra_params`` go into the request body as they
    are (``top_p``, ``top_k``, ``min_p``, ``stop``, ...).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    base_url: str = Field(min_length=1)
    model: str = Field(min_length=1)
    api_key_env: str | None = None
    temperature: float | None = Field(default=None, ge=0.0)
    max_tokens: int | None = Field(default=None, gt=0)
    system_prompt: str | None = None
    seed: int | None = None
    extra_params: dict[str, Any] = Field(default_factory=dict)
    json_schema_mode: SchemaMode = "json_schema"
    timeout_s: float = Field(default=120.0, gt=0.0)
    connect_timeout_s: float = Field(default=5.0, gt=0.0)
    max_retries: int = Field(default=3, ge=0)
    max_concurrency: int = Field(default=4, gt=0)


@dataclass(frozen=True)
class Completion:
    """One finished answer. Token counts are None when the server did not report usage."""

    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_s: float
    finish_reason: str | None
    model: str
    endpoint: str
    first_token_s: float | None = None

    def json(self) -> Any:
        """The text parsed as JSON (for answers requested with a JSON schema)."""
        return json.loads(self.text)


class EndpointError(Exception):
    """A request to an endpoint failed; ``endpoint`` is its Arena name, which the message starts with."""

    def __init__(self, endpoint: str, message: str) -> None:
        super().__init__(f"endpoint {endpoint!r}: {message}")
        self.endpoint = endpoint


class EndpointUnavailable(EndpointError):
    """No answer after all retries: refused or dropped connections, or timeouts."""


class EndpointResponseError(EndpointError):
    """The endpoint answered with an error status (after retries where they apply) or broke a stream;
    ``status`` is the HTTP status when there was one."""

    def __init__(self, endpoint: str, message: str, *, status: int | None = None) -> None:
        super().__init__(endpoint, message)
        self.status = status


def _read_api_key(config: EndpointConfig, environ: Mapping[str, str]) -> str:
    if config.api_key_env is None:
        return NO_KEY
    key = environ.get(config.api_key_env)
    if not key:
        raise EndpointError(config.name, f"environment variable {config.api_key_env} is not set")
    return key


class EndpointClient:
    """Async chat completions against one endpoint, at most ``max_concurrency`` requests at a time.

    Use as ``async with EndpointClient(config) as client:``; ``environ`` replaces ``os.environ`` as the
    place the key is read from.
    """

    def __init__(self, config: EndpointConfig, *, environ: Mapping[str, str] | None = None) -> None:
        self.config = config
        self._openai = openai.AsyncOpenAI(
            api_key=_read_api_key(config, os.environ if environ is None else environ),
            base_url=config.base_url,
            timeout=openai.Timeout(config.timeout_s, connect=config.connect_timeout_s),
            max_retries=config.max_retries,
        )
        self._slots = asyncio.Semaphore(config.max_concurrency)

    def __repr__(self) -> str:
        return f"EndpointClient(name={self.config.name!r}, base_url={self.config.base_url!r})"

    async def __aenter__(self) -> EndpointClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._openai.close()

    def _request(
        self,
        messages: Sequence[Message],
        json_schema: Mapping[str, Any] | None,
        *,
        stream: bool,
        seed: int | None = None,
        mode: SchemaMode | None = None,
    ) -> dict[str, Any]:
        cfg = self.config
        turns: list[Message] = list(messages)
        if cfg.system_prompt is not None and (not turns or turns[0]["role"] != "system"):
            turns.insert(0, {"role": "system", "content": cfg.system_prompt})
        body: dict[str, Any] = {}
        for key, value in (
            ("temperature", cfg.temperature),
            ("max_tokens", cfg.max_tokens),
            ("seed", cfg.seed if seed is None else seed),
        ):
            if value is not None:
                body[key] = value
        mode = cfg.json_schema_mode if mode is None else mode
        if json_schema is not None and mode != "text":
            body["response_format"] = (
                {"type": "json_schema", "json_schema": {"name": "answer", "schema": dict(json_schema)}}
                if mode == "json_schema"
                else {"type": "json_object", "schema": dict(json_schema)}
            )
        if stream:
            body["stream_options"] = {"include_usage": True}
        # Everything but model and messages goes in the body as given, so parameters that the typed
        # openai API does not know (top_k, min_p, a server's own options) pass as well.
        return {"model": cfg.model, "messages": turns, "extra_body": {**body, **cfg.extra_params}}

    def _error(self, exc: openai.OpenAIError, *, during: str) -> EndpointError:
        """Our error for an ``openai`` one: Arena's name, the base URL, what failed; never the key."""
        where = f"{self.config.base_url} (model {self.config.model}) {during}"
        if isinstance(exc, openai.APITimeoutError):
            return EndpointUnavailable(
                self.config.name, f"{where}: timed out after {self.config.max_retries} retries"
            )
        if isinstance(exc, openai.APIConnectionError):
            return EndpointUnavailable(
                self.config.name, f"{where}: cannot connect after {self.config.max_retries} retries"
            )
        if isinstance(exc, openai.APIStatusError):
            return EndpointResponseError(
                self.config.name,
                f"{where}: HTTP {exc.status_code}: {_server_message(exc.message)}",
                status=exc.status_code,
            )
        return EndpointResponseError(self.config.name, f"{where}: {type(exc).__name__}: {_short(str(exc))}")

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        json_schema: Mapping[str, Any] | None = None,
        seed: int | None = None,
        json_schema_mode: SchemaMode | None = None,
        retries: int | None = None,
    ) -> Completion:
        """One answer to ``messages`` (with the configured system prompt first unless they have one).

        With ``json_schema`` the server is asked to constrain the answer to it (as ``json_schema_mode``
        says, else as configured); `Completion.json` parses it. ``seed`` replaces the configured seed for
        this request (several samples of one prompt); ``retries`` the configured retries (a probe of what
        a server takes asks once).

        Raises
        ------
        EndpointUnavailable
            No connection or no answer in time after all retries.
        EndpointResponseError
            An error status that is not retried, or still there after the retries.
        """
        async with self._slots:
            start = time.perf_counter()
            try:
                api = self._openai if retries is None else self._openai.with_options(max_retries=retries)
                response = await api.chat.completions.create(
                    **self._request(messages, json_schema, stream=False, seed=seed, mode=json_schema_mode)
                )
            except openai.OpenAIError as exc:
                raise self._error(exc, during="completion") from exc
            latency = time.perf_counter() - start
        if not response.choices:
            raise EndpointResponseError(self.config.name, "the answer has no choices")
        choice = response.choices[0]
        usage = response.usage
        return Completion(
            text=choice.message.content or "",
            prompt_tokens=usage.prompt_tokens if usage is not None else None,
            completion_tokens=usage.completion_tokens if usage is not None else None,
            latency_s=latency,
            finish_reason=choice.finish_reason,
            model=response.model or self.config.model,
            endpoint=self.config.name,
        )

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        json_schema: Mapping[str, Any] | None = None,
        on_send: Callable[[], None] | None = None,
    ) -> AsyncIterator[str | Completion]:
        """Text deltas of the answer as they arrive, then the finished `Completion`.

        ``on_send`` is called when the request leaves, after its wait for one of the ``max_concurrency``
        slots (a caller timing the server does not count that wait against it). Raises as `complete`
        does; a stream that breaks after it started raises `EndpointResponseError`.
        """
        async with self._slots:
            if on_send is not None:
                on_send()
            start = time.perf_counter()
            parts: list[str] = []
            first_token_s: float | None = None
            finish_reason: str | None = None
            model = self.config.model
            prompt_tokens: int | None = None
            completion_tokens: int | None = None
            try:
                chunks = await self._openai.chat.completions.create(
                    **self._request(messages, json_schema, stream=True), stream=True
                )
            except openai.OpenAIError as exc:
                raise self._error(exc, during="stream start") from exc
            try:
                async with chunks:
                    async for chunk in chunks:
                        model = chunk.model or model
                        if chunk.usage is not None:
                            prompt_tokens = chunk.usage.prompt_tokens
                            completion_tokens = chunk.usage.completion_tokens
                        for choice in chunk.choices[:1]:
                            finish_reason = choice.finish_reason or finish_reason
                            delta = choice.delta.content
                            if delta:
                                if first_token_s is None:
                                    first_token_s = time.perf_counter() - start
                                parts.append(delta)
                                yield delta
            except (openai.OpenAIError, OSError) as exc:  # it broke under the stream
                raise EndpointResponseError(
                    self.config.name,
                    f"{self.config.base_url} (model {self.config.model}) stream broke after "
                    f"{len(parts)} deltas: {type(exc).__name__}: {_short(str(exc))}",
                ) from exc
            latency = time.perf_counter() - start
        if finish_reason is None:  # a connection closed early can look like a clean end of the body
            raise EndpointResponseError(
                self.config.name,
                f"{self.config.base_url} (model {self.config.model}) stream ended without a finish reason "
                f"after {len(parts)} deltas",
            )
        yield Completion(
            text="".join(parts),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_s=latency,
            finish_reason=finish_reason,
            model=model,
            endpoint=self.config.name,
            first_token_s=first_token_s,
        )


def _server_message(text: str) -> str:
    """A server's error message on one line: white space folded, a Python traceback it appends cut off."""
    folded = re.sub(r"^Error code: \d+ - ", "", " ".join(text.split()))  # the openai client's prefix
    return _short(folded.split(' File "', 1)[0].rstrip(" :"))


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
