"""Arena's side of LLM endpoints: an async client for any OpenAI-compatible chat server."""

from arena.llm.client import (
    Completion,
    EndpointClient,
    EndpointConfig,
    EndpointError,
    EndpointResponseError,
    EndpointUnavailable,
    Message,
)

__all__ = [
    "Completion",
    "EndpointClient",
    "EndpointConfig",
    "EndpointError",
    "EndpointResponseError",
    "EndpointUnavailable",
    "Message",
]
