"""An OpenAI-compatible chat-completions client: timeouts, bounded retries with backoff, a concurrency limit,
streaming, and structured output (JSON by schema, then ``json_object``, then lenient extraction).

It speaks the plain HTTP protocol with httpx, so any endpoint that implements ``POST /chat/completions``
works: OpenAI, vLLM, Ollama, llama.cpp's ``llama-server``. Every failure leaves as an ``LLMError``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from ragloom.errors import LLMError, LLMOutputError, LLMTimeoutError, LLMUnavailableError
from ragloom.llm.jsonout import parse_json

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({429, 502, 503, 504})
# A server that does not know a response_format answers one of these (llama_cpp.server: 500 on json_schema).
FORMAT_REJECTED = frozenset({400, 404, 415, 422, 500, 501})
JSON_MODES = ("json_schema", "json_object", "none")

Message = Mapping[str, str]


@dataclass
class Completion:
    """One model reply. ``finish_reason`` ``length`` means it was cut at ``max_tokens``."""

    text: str
    finish_reason: str
    tokens_in: int
    tokens_out: int
    latency_ms: float
    model: str = ""
    json_mode: str = ""  # structured calls: the mode that produced ``text``

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"


@dataclass
class Usage:
    """What one client has sent: requests (each retry counts), successful calls, tokens."""

    requests: int = 0
    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0


class LLMClient:
    """One endpoint, one httpx connection pool. Thread-safe; at most ``max_concurrency`` requests in flight.

    ``api_key`` goes into the Authorization header only; it is never logged or put into an error message.
    """

    def __init__(self, base_url: str, model: str = "", api_key: str = "", *, timeout: float = 60.0,
                 max_retries: int = 2, max_concurrency: int = 4, backoff_seconds: float = 0.5,
                 transport: httpx.BaseTransport | None = None) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise LLMError(f"LLM base URL {base_url!r} must start with http:// or https://")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_seconds = backoff_seconds
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(base_url=self.base_url, headers=headers, transport=transport,
                                  timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)))
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self._lock = threading.Lock()
        self._json_mode = JSON_MODES[0]  # lowered for good once the endpoint rejects a mode
        self.usage = Usage()

    @classmethod
    def from_settings(cls, settings: Any) -> LLMClient | None:
        """The configured endpoint's client, or None when no model is configured."""
        if not settings.llm_base_url:
            return None
        return cls(settings.llm_base_url, settings.llm_model, settings.llm_api_key,
                   timeout=settings.llm_timeout_seconds, max_retries=settings.llm_max_retries,
                   max_concurrency=settings.llm_max_concurrency)

    def describe(self) -> str:
        return f"{self.model or 'default model'} at {self.base_url}"

    # requests -----------------------------------------------------------------------------------------
    def chat(self, messages: Sequence[Message], *, max_tokens: int, temperature: float = 0.0,
             stop: Sequence[str] | None = None, response_format: Mapping[str, Any] | None = None,
             allow_truncated: bool = False, on_token: Callable[[str], None] | None = None) -> Completion:
        """One chat completion. A reply cut at ``max_tokens`` raises LLMOutputError unless ``allow_truncated``.

        ``on_token`` streams: it is called with each piece of text as it arrives.
        """
        body: dict[str, Any] = {"messages": [dict(m) for m in messages], "max_tokens": max_tokens,
                                "temperature": temperature}
        if self.model:
            body["model"] = self.model
        if stop:
            body["stop"] = list(stop)
        if response_format is not None:
            body["response_format"] = dict(response_format)
        started = time.perf_counter()
        if on_token is None:
            data = self._request(body)
            completion = _parse_reply(data, started)
        else:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
            completion = self._stream(body, on_token, started)
        with self._lock:
            self.usage.calls += 1
            self.usage.tokens_in += completion.tokens_in
            self.usage.tokens_out += completion.tokens_out
        if completion.truncated and not allow_truncated:
            raise LLMOutputError(f"the model's reply was cut at max_tokens={max_tokens} (finish_reason 'length'); "
                                 "raise the limit or shorten the prompt")
        return completion

    def chat_json(self, messages: Sequence[Message], schema: Mapping[str, Any], *, name: str, max_tokens: int,
                  temperature: float = 0.0) -> tuple[Any, Completion]:
        """A reply parsed as JSON of ``schema``: asked by schema, else as ``json_object``, else in the prompt
        only and extracted leniently. Truncation or an unusable reply raises LLMOutputError."""
        while True:
            mode = self._json_mode
            response_format = _response_format(mode, schema, name)
            try:
                completion = self.chat(messages, max_tokens=max_tokens, temperature=temperature,
                                       response_format=response_format)
            except LLMError as e:
                if response_format is None or e.status not in FORMAT_REJECTED:
                    raise
                self._lower_json_mode(mode, e)
                continue
            completion.json_mode = mode
            return parse_json(completion.text, schema), completion

    def _lower_json_mode(self, mode: str, error: LLMError) -> None:
        with self._lock:
            if self._json_mode == mode:
                self._json_mode = JSON_MODES[JSON_MODES.index(mode) + 1]
                log.info("LLM endpoint rejected response_format %s (HTTP %s); using %s", mode, error.status,
                         self._json_mode)

    def _send(self, body: dict[str, Any], stream: bool) -> httpx.Response:
        """POST with retries on connection errors, 429 and 502-504 (exponential backoff)."""
        attempt = 0
        while True:
            with self._lock:
                self.usage.requests += 1
            try:
                request = self._http.build_request("POST", "/chat/completions", json=body)
                response = self._http.send(request, stream=stream)
            except httpx.TimeoutException as e:
                raise LLMTimeoutError(f"the model at {self.base_url} did not answer within {self.timeout:g}s "
                                      f"({type(e).__name__})") from e
            except httpx.TransportError as e:
                if attempt >= self.max_retries:
                    raise LLMUnavailableError(f"cannot reach the model at {self.base_url} after {attempt + 1} "
                                              f"attempts ({type(e).__name__}: {e})") from e
            else:
                if response.status_code < 400:
                    return response
                if stream:
                    response.read()
                response.close()
                if response.status_code not in RETRY_STATUSES or attempt >= self.max_retries:
                    raise _http_error(response, attempt + 1, self.base_url)
            time.sleep(self.backoff_seconds * 2 ** attempt)
            attempt += 1

    def _request(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._slots:
            response = self._send(body, stream=False)
            try:
                return response.json()
            except ValueError as e:
                raise LLMError(f"the model at {self.base_url} answered with something that is not JSON") from e

    def _stream(self, body: dict[str, Any], on_token: Callable[[str], None], started: float) -> Completion:
        pieces: list[str] = []
        finish, model, usage = "", "", {}
        chunks = 0
        with self._slots:
            response = self._send(body, stream=True)
            try:
                for event in _sse_events(response.iter_lines()):
                    model = event.get("model") or model
                    usage = event.get("usage") or usage
                    for choice in event.get("choices") or []:
                        piece = (choice.get("delta") or {}).get("content") or ""
                        if piece:
                            chunks += 1
                            pieces.append(piece)
                            on_token(piece)
                        finish = choice.get("finish_reason") or finish
            except httpx.TimeoutException as e:
                raise LLMTimeoutError(f"the model at {self.base_url} stopped streaming for over {self.timeout:g}s") \
                    from e
            except httpx.TransportError as e:
                raise LLMUnavailableError(f"the stream from {self.base_url} broke ({type(e).__name__})") from e
            finally:
                response.close()
        return Completion(text="".join(pieces), finish_reason=finish or "stop",
                          tokens_in=int(usage.get("prompt_tokens") or 0),
                          tokens_out=int(usage.get("completion_tokens") or chunks),
                          latency_ms=(time.perf_counter() - started) * 1000, model=model)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _response_format(mode: str, schema: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    if mode == "json_schema":
        # not strict: OpenAI's strict mode refuses length caps; grammar-based servers constrain either way
        return {"type": "json_schema", "json_schema": {"name": name, "schema": dict(schema), "strict": False}}
    if mode == "json_object":
        return {"type": "json_object"}
    return None


def _http_error(response: httpx.Response, attempts: int, base_url: str) -> LLMError:
    status = response.status_code
    try:
        detail = response.json().get("error", "")
        detail = detail.get("message", "") if isinstance(detail, dict) else str(detail)
    except (ValueError, AttributeError):
        detail = response.text
    detail = " ".join(str(detail).split())[:300]
    if status in (401, 403):
        return LLMError(f"the model at {base_url} refused the credentials (HTTP {status}): check "
                        "RAGLOOM_LLM_API_KEY", status)
    if status in RETRY_STATUSES or status >= 500:
        return LLMUnavailableError(f"the model at {base_url} failed with HTTP {status} after {attempts} attempts: "
                                   f"{detail}", status)
    return LLMError(f"the model at {base_url} rejected the request (HTTP {status}): {detail}", status)


def _parse_reply(data: Mapping[str, Any], started: float) -> Completion:
    try:
        choice = data["choices"][0]
        text = choice["message"].get("content") or ""
    except (KeyError, IndexError, TypeError, AttributeError) as e:
        raise LLMError(f"the reply has no choices[0].message: {json.dumps(data)[:200]}") from e
    usage = data.get("usage") or {}
    return Completion(text=text, finish_reason=choice.get("finish_reason") or "stop",
                      tokens_in=int(usage.get("prompt_tokens") or 0),
                      tokens_out=int(usage.get("completion_tokens") or 0),
                      latency_ms=(time.perf_counter() - started) * 1000, model=str(data.get("model") or ""))


def _sse_events(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """Server-sent events of a streamed completion: ``data: {...}`` lines until ``data: [DONE]``."""
    for line in lines:
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            return
        try:
            event = json.loads(payload)
        except ValueError:
            continue
        if isinstance(event, dict):
            if "error" in event:
                raise LLMError(f"the model reported an error mid-stream: {str(event['error'])[:300]}")
            yield event
