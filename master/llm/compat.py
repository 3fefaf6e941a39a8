"""What an OpenAI-compatible server accepts: one :class:`Compat` per kind of server.

The OpenAI API, llama.cpp (``llama-server`` and llama-cpp-python), Ollama and vLLM all speak
``POST /chat/completions``, but not the same dialect. The master sends every server the common
subset, plus what the server is known to take:

- an assistant message that carries ``tool_calls`` has ``"content": ""``, not ``null``: the
  Jinja chat templates of llama.cpp (and of other template-driven servers) fail on ``null``
  (``'dict object' has no attribute 'content'``); only the OpenAI API is known to take ``null``;
- tool-call ids are short and stable (:func:`wire_call_id`): at most
  :data:`MAX_CALL_ID` characters, and 9 letters or digits for Mistral-family models, whose
  templates require it; the same id always maps to the same short one, so an assistant message
  and the tool messages that answer it agree;
- ``stream_options`` (usage in streams) only to servers that take it;
- a round that offers tools is streamed only by servers that stream it (not llama-cpp-python);
- the per-round output bound as ``max_completion_tokens`` for the OpenAI API (its reasoning
  models refuse ``max_tokens``), ``max_tokens`` everywhere else.

- the server's own tokenizer, where it offers one (:data:`Compat.tokenizers`): llama-server's
  ``POST /tokenize``, llama-cpp-python's ``POST /extras/tokenize``, vLLM's ``POST /tokenize``
  (Ollama and the OpenAI API offer none); the context budget is calibrated with it
  (:mod:`master.llm.windows`).

``OPENAGENT_LLM_COMPAT`` picks the dialect; ``auto`` asks the server once (:func:`detect`:
``/props`` for llama.cpp, ``/api/version`` for Ollama, ``/models`` for vLLM and
llama-cpp-python), and logs its choice. When nothing answers, the safe common subset
(:data:`GENERIC`) is used.
"""

from __future__ import annotations

import hashlib
import logging
import re
import string
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal
from urllib.parse import urlsplit

logger = logging.getLogger("master.llm.compat")

CompatSetting = Literal["auto", "openai", "llamacpp", "ollama", "vllm"]
"""The values of ``OPENAGENT_LLM_COMPAT``."""

Tokenizer = Literal["llama-server", "llama-cpp-python", "vllm"]
"""A server's tokenize endpoint, by the server that offers it (:func:`tokenize_request`)."""

MAX_CALL_ID = 40
"""The longest tool-call id sent to a server (OpenAI's own are 29 to 40 characters)."""

MISTRAL_CALL_ID = 9
"""Mistral-family chat templates require tool-call ids of exactly 9 letters or digits."""

_SAFE_ID = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_-]")
MAX_FUNCTION_NAME = 64
_MISTRAL_ID = re.compile(r"^[A-Za-z0-9]{9}$")
_MISTRAL_MODEL = re.compile(r"mistral|mixtral|ministral|codestral|devstral|magistral|pixtral", re.I)
_ALPHANUMERIC = string.ascii_letters + string.digits


@dataclass(frozen=True, slots=True)
class Compat:
    """The dialect of one OpenAI-compatible server."""

    name: str
    """``openai``, ``llamacpp``, ``ollama``, ``vllm``, or ``generic`` (nothing was learned)."""
    null_content: bool = False
    """The server takes ``"content": null`` beside ``tool_calls``."""
    stream_usage: bool = False
    """The server takes ``stream_options: {"include_usage": true}``."""
    max_tokens_field: str = "max_tokens"
    """The name of the per-round output bound."""
    context_size: int | None = None
    """The context window the server reported, if it did."""
    tokenizers: tuple[Tokenizer, ...] = ()
    """The tokenize endpoints the server may offer, tried in order (the first that answers is used)."""
    stream_tools: bool = True
    """The server streams a round that offers tools. llama-cpp-python's function calling does not
    (``Automatic streaming tool choice is not supported``, and it ignores tools without
    ``tool_choice``): such a round is asked unstreamed, its text handed on as one token."""


OPENAI = Compat("openai", null_content=True, stream_usage=True, max_tokens_field="max_completion_tokens")
LLAMACPP = Compat("llamacpp", stream_usage=True, tokenizers=("llama-server", "llama-cpp-python"))
OLLAMA = Compat("ollama", stream_usage=True)
VLLM = Compat("vllm", stream_usage=True, tokenizers=("vllm",))
GENERIC = Compat("generic")
"""The common subset, for a server that said nothing about itself."""

PROFILES: dict[str, Compat] = {c.name: c for c in (OPENAI, LLAMACPP, OLLAMA, VLLM)}


def wire_call_id(call_id: str, model: str) -> str:
    """The id a server is sent for the tool call ``call_id``: the id itself when it is short and
    plain (and, for a Mistral-family ``model``, 9 letters or digits), else one derived from it
    (the same one every time)."""
    mistral = _MISTRAL_MODEL.search(model) is not None
    if (_MISTRAL_ID if mistral else _SAFE_ID).fullmatch(call_id):
        return call_id
    digest = hashlib.blake2b(call_id.encode(), digest_size=16).digest()
    if mistral:
        return "".join(_ALPHANUMERIC[byte % len(_ALPHANUMERIC)] for byte in digest[:MISTRAL_CALL_ID])
    return "call_" + digest[:12].hex()


def wire_message(message: Mapping[str, Any], compat: Compat, model: str) -> Mapping[str, Any]:
    """``message`` as ``compat``'s server takes it (the same object when nothing changes)."""
    role = message.get("role")
    if role == "assistant" and message.get("tool_calls"):
        calls = [_wire_call(call, model) for call in message["tool_calls"]]
        fixed = {**message, "tool_calls": calls}
        if fixed.get("content") is None and not compat.null_content:
            fixed["content"] = ""
        return fixed
    if role == "tool" and isinstance(message.get("tool_call_id"), str):
        short = wire_call_id(message["tool_call_id"], model)
        if short != message["tool_call_id"]:
            return {**message, "tool_call_id": short}
    return message


def _wire_call(call: Mapping[str, Any], model: str) -> dict[str, Any]:
    """A recalled tool call with a short id, and a function name the API takes: a weak model may
    have called ``calc.add`` or ``get weather``, which the server would refuse to see again."""
    fixed = {**call, "id": wire_call_id(str(call.get("id", "")), model)}
    function = call.get("function")
    if isinstance(function, Mapping) and isinstance(function.get("name"), str):
        name = _UNSAFE_NAME.sub("_", function["name"])[:MAX_FUNCTION_NAME] or "_"
        if name != function["name"]:
            fixed["function"] = {**function, "name": name}
    return fixed


Getter = Callable[[str], Awaitable[Any]]
"""GETs a URL and returns its JSON (raises on any failure or non-2xx status)."""


async def detect(base_url: str, get: Getter) -> Compat:
    """What the server at ``base_url`` (``…/v1``) says it is; :data:`GENERIC` if it says nothing.

    ``get`` is bounded by the caller's timeout; each probe that fails is skipped."""
    root = _root(base_url)
    host = urlsplit(base_url).hostname or ""
    if host == "api.openai.com":
        return OPENAI
    props = await _probe(get, f"{root}/props")
    if isinstance(props, dict) and ("default_generation_settings" in props or "n_ctx" in props):
        settings = props.get("default_generation_settings")
        n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else props.get("n_ctx")
        return replace(LLAMACPP, context_size=_positive(n_ctx), tokenizers=("llama-server",))
    version = await _probe(get, f"{root}/api/version")
    if isinstance(version, dict) and isinstance(version.get("version"), str):
        return OLLAMA
    models = await _probe(get, f"{base_url.rstrip('/')}/models")
    entries = models.get("data") if isinstance(models, dict) else None
    for entry in entries if isinstance(entries, list) else ():
        if not isinstance(entry, dict):
            continue
        owner = entry.get("owned_by")
        if owner == "vllm" or "max_model_len" in entry:
            return replace(VLLM, context_size=_positive(entry.get("max_model_len")))
        if owner in ("llamacpp", "me"):  # llama-server, llama-cpp-python
            meta = entry.get("meta")
            n_ctx = meta.get("n_ctx_train") if isinstance(meta, dict) else None
            if owner == "llamacpp":
                return replace(LLAMACPP, context_size=_positive(n_ctx), tokenizers=("llama-server",))
            return replace(
                LLAMACPP, context_size=_positive(n_ctx), tokenizers=("llama-cpp-python",), stream_tools=False
            )
    return GENERIC


def tokenize_request(
    tokenizer: Tokenizer, base_url: str, model: str, text: str
) -> tuple[str, dict[str, Any]]:
    """The URL and JSON body that ask ``tokenizer``'s endpoint (of the server at ``base_url``,
    ``…/v1``) to tokenize ``text`` for ``model``."""
    root = _root(base_url)
    if tokenizer == "llama-server":
        return f"{root}/tokenize", {"content": text}
    if tokenizer == "llama-cpp-python":
        return f"{root}/extras/tokenize", {"input": text, "model": model}
    return f"{root}/tokenize", {"model": model, "prompt": text}


def token_count(answer: Any) -> int | None:
    """The number of tokens a tokenize endpoint answered (``tokens`` list, or vLLM's ``count``),
    or ``None`` when the answer is not one."""
    if not isinstance(answer, dict):
        return None
    tokens = answer.get("tokens")
    if isinstance(tokens, list):
        return len(tokens)
    count = answer.get("count")
    return count if isinstance(count, int) and count >= 0 else None


def _root(base_url: str) -> str:
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


async def _probe(get: Getter, url: str) -> Any:
    try:
        return await get(url)
    except Exception as exc:  # any failure means "not this kind of server"
        logger.debug("compat probe %s: %s", url, exc)
        return None


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and value > 0 else None
