"""Error classes shared by every layer: provider failures by class and bad input.

A real vendor error and a scripted `error:` item become the same class, so the engine treats them alike.
"""
from __future__ import annotations


class OrchestratorError(Exception):
    """Base of every error this package raises on purpose."""


class InputError(OrchestratorError):
    """Bad user input (scenario file, CLI usage, agent definition): exit code 2."""


class RoomNotFound(InputError):
    """No room in the database has the id, id prefix or name asked for (the web answers 404)."""


class AmbiguousRoom(InputError):
    """An id prefix that more than one room's id starts with, and no room has as its name: give more of the id."""


class ProviderError(OrchestratorError):
    """A model call failed. `kind` names the class; `retryable` says whether backing off may help."""

    kind = "provider"
    retryable = False
    account = False  # the credential is at fault: rotate and cool it down
    fatal = False  # no later call can do better: a run stops at the first one
    retries: int | None = None  # at most this many retries of this class, fewer than the policy's; None: the policy's

    def __init__(self, message: str, *, provider: str = "", retry_after: float | None = None):
        super().__init__(message)
        self.provider = provider
        self.retry_after = retry_after


class RateLimitError(ProviderError):
    kind, retryable = "rate_limit", True


class OverloadedError(ProviderError):
    kind, retryable = "overloaded", True


class ServerError(ProviderError):
    kind, retryable = "server", True


class ProviderTimeout(ProviderError):
    kind, retryable = "timeout", True


class ProviderConnectionError(ProviderError):
    kind, retryable = "connection", True


class UnreachableError(ProviderConnectionError):
    """Nothing listens at the address and nothing ever answered there in this process: a wrong
    address or a server that is not running, which no back-off will fix."""

    kind, retryable, fatal = "unreachable", False, True


class AuthError(ProviderError):
    kind, account = "auth", True


class QuotaError(ProviderError):
    kind, account = "quota", True


class InvalidRequestError(ProviderError):
    kind = "invalid_request"


class ModelNotFoundError(InvalidRequestError):
    """The server does not serve the model asked for (HTTP 404): a typo in the model name."""

    kind, fatal = "model_not_found", True


class ContentPolicyError(ProviderError):
    kind = "content_policy"


class ContextOverflowError(ProviderError):
    """The prompt is longer than the model's window. `window` is that window in tokens, when the refusal named it."""

    kind = "context_overflow"

    def __init__(self, message: str, *, provider: str = "", retry_after: float | None = None,
                 window: int | None = None):
        super().__init__(message, provider=provider, retry_after=retry_after)
        self.window = window


class TruncatedPromptError(ContextOverflowError):
    """The server cut the prompt to its window without a word (Ollama): its message says what to set,
    which tells the user more than "too long"."""


class ProtocolError(ProviderError):
    """The server broke the wire format (malformed SSE or JSON): a glitch worth another try."""

    kind, retryable = "protocol", True


class MalformedOutputError(ProviderError):
    """The model wrote a reply its server could not parse (a tool call out of the chat format, which
    llama.cpp reports as a 500): the server is fine, and another sample may be well formed, once or twice."""

    kind, retryable, retries = "malformed_output", True, 2


ERROR_KINDS: dict[str, type[ProviderError]] = {
    cls.kind: cls
    for cls in (RateLimitError, OverloadedError, ServerError, ProviderTimeout, ProviderConnectionError,
                AuthError, QuotaError, InvalidRequestError, ContentPolicyError, ContextOverflowError,
                ProtocolError, UnreachableError, ModelNotFoundError, MalformedOutputError)
}

# How a retry's reason reads in a transcript, where the kind alone would blame the wrong party.
_RETRY_LABELS = {"malformed_output": "the model's reply was malformed", "server": "server error"}


def retry_label(kind: str) -> str:
    """A retry's reason (an error kind) as the transcript shows it."""
    return _RETRY_LABELS.get(kind, kind.replace("_", " "))


TOO_LONG = ("This conversation is too long for the model to read at once. Start a new chat for "
            "the next step; everything built so far is kept.")


class ScriptExhausted(OrchestratorError):
    """A scripted model's queue ran out: the scenario is missing responses."""

FATAL_KINDS = frozenset(kind for kind, cls in ERROR_KINDS.items() if cls.fatal)
