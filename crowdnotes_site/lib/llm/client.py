"""The LLM layer: one client for any OpenAI-compatible endpoint, plus output parsers.

This is the only module that imports `openai`, and only when a client is built or a call
fails (the SDK costs ~0.8 s to import; web processes and commands that never reach an LLM
do not pay it). It knows nothing about Django: the
config is built from a settings object (or any mapping) by `LLMConfig.from_settings`.
Retries are ours, not the SDK's (the SDK gets max_retries=0), so the policy is explicit:
429, 5xx, timeouts and connection errors are retried with exponential backoff up to
`max_retries` times; anything else fails at once.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

TASK_SETTING_PREFIX = "LLM_MODEL_"


class LLMError(Exception):
    """Base class for LLM layer failures."""


class LLMNotConfigured(LLMError):
    """No endpoint is configured (LLM_BASE_URL unset)."""


class LLMTransientError(LLMError):
    """429/5xx/timeout/connection error that persisted through all retries."""


class LLMPermanentError(LLMError):
    """A failure that retrying the same request will not fix (4xx, bad response)."""


class LLMBudgetExceeded(LLMPermanentError):
    """The user whose work this is has used up the day's LLM calls (LLM_DAILY_CALLS_PER_USER)."""


@dataclass(frozen=True)
class LLMConfig:
    base_url: str | None = None
    api_key: str = ""
    model: str = ""
    task_models: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 30.0
    max_retries: int = 3
    backoff_base_s: float = 0.5
    backoff_max_s: float = 8.0

    @property
    def configured(self) -> bool:
        return bool(self.base_url)

    def model_for(self, task: str) -> str:
        task = task.lower()
        family = "judge" if task.startswith("judge_") else ""
        return self.task_models.get(task) or self.task_models.get(family) or self.model

    @classmethod
    def from_settings(cls, source: Any, *, environ: Mapping[str, str] | None = None) -> LLMConfig:
        """Build from a Django settings object or a plain mapping of setting names.

        Per-task overrides are the settings (or, with `environ`, environment variables)
        named LLM_MODEL_<TASK> (e.g. LLM_MODEL_DRAFT, LLM_MODEL_JUDGE_RELEVANCE; LLM_MODEL_JUDGE
        covers all three judges), or an LLM_TASK_MODELS mapping.
        """
        if isinstance(source, Mapping):
            values = dict(source)
        else:
            values = {name: getattr(source, name) for name in dir(source) if name.isupper()}
        for name, value in (environ or {}).items():
            if name.startswith(TASK_SETTING_PREFIX):
                values.setdefault(name, value)
        task_models = {
            name[len(TASK_SETTING_PREFIX) :].lower(): str(value)
            for name, value in values.items()
            if name.startswith(TASK_SETTING_PREFIX) and value
        }
        task_models.update({k.lower(): v for k, v in (values.get("LLM_TASK_MODELS") or {}).items()})
        return cls(
            base_url=values.get("LLM_BASE_URL") or None,
            api_key=values.get("LLM_API_KEY") or "",
            model=values.get("LLM_MODEL") or "",
            task_models=task_models,
            timeout_s=float(values.get("LLM_TIMEOUT_S") or 30.0),
            max_retries=int(values.get("LLM_MAX_RETRIES", 3)),
            backoff_base_s=float(values.get("LLM_BACKOFF_BASE_S") or 0.5),
            backoff_max_s=float(values.get("LLM_BACKOFF_MAX_S") or 8.0),
        )


@dataclass(frozen=True)
class LLMResult:
    text: str
    model: str
    latency_s: float
    attempts: int
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    finish_reason: str | None = None


Message = Mapping[str, str]


class LLMClient:
    """A chat-completions client with explicit, bounded retries."""

    def __init__(self, config: LLMConfig, *, sleep: Callable[[float], None] = time.sleep) -> None:
        if not config.configured:
            raise LLMNotConfigured("LLM_BASE_URL is not set")
        # Deferred: the SDK costs ~0.8 s to import; only a process that reaches an LLM pays it.
        import openai

        self.config = config
        self._sleep = sleep
        # The SDK requires some key; local servers (vLLM, Ollama, llama.cpp) ignore it.
        self._client = openai.OpenAI(
            base_url=config.base_url,
            api_key=config.api_key or "not-needed",
            timeout=config.timeout_s,
            max_retries=0,
        )

    def complete(
        self,
        *,
        task: str,
        messages: Sequence[Message],
        temperature: float = 0.0,
        top_p: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
    ) -> LLMResult:
        """Run one chat completion for `task`; raise LLMTransientError/LLMPermanentError."""
        import openai  # deferred (see __init__); already loaded once a client exists

        model = self.config.model_for(task)
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": [dict(m) for m in messages],
            "temperature": temperature,
        }
        if top_p is not None:
            kwargs["top_p"] = top_p
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if seed is not None:
            kwargs["seed"] = seed
        attempt = 0
        started = time.monotonic()
        while True:
            attempt += 1
            try:
                response = self._client.chat.completions.create(**kwargs)
            except (
                openai.APIConnectionError,
                openai.RateLimitError,
                openai.InternalServerError,
            ) as exc:
                # APITimeoutError is a subclass of APIConnectionError.
                if attempt > self.config.max_retries:
                    raise LLMTransientError(f"{task}: {_describe(exc)} after {attempt} attempts") from exc
                delay = self.backoff_delay(attempt, exc)
                logger.warning(
                    "llm %s attempt %d failed (%s); retrying in %.2fs",
                    task,
                    attempt,
                    _describe(exc),
                    delay,
                )
                self._sleep(delay)
                continue
            except openai.APIStatusError as exc:
                if exc.status_code >= 500:
                    if attempt > self.config.max_retries:
                        raise LLMTransientError(f"{task}: {_describe(exc)} after {attempt} attempts") from exc
                    self._sleep(self.backoff_delay(attempt, exc))
                    continue
                raise LLMPermanentError(f"{task}: {_describe(exc)}") from exc
            except openai.OpenAIError as exc:
                raise LLMPermanentError(f"{task}: {_describe(exc)}") from exc
            except ValueError as exc:  # a 200 whose body is not JSON
                raise LLMPermanentError(f"{task}: malformed response body ({exc})") from exc
            return _to_result(response, model=model, started=started, attempts=attempt, task=task)

    def backoff_delay(self, attempt: int, exc: Exception | None = None) -> float:
        """Exponential backoff, honouring a Retry-After header within the cap."""
        delay = self.config.backoff_base_s * (2 ** (attempt - 1))
        retry_after = _retry_after(exc)
        if retry_after is not None:
            delay = max(delay, retry_after)
        return min(delay, self.config.backoff_max_s)


class CountedClient(LLMClient):
    """An LLM client whose every call is first charged to someone: `charge()` counts the call or
    raises (LLMBudgetExceeded) to refuse it before anything is sent. The wrapped client does the
    work, so settings, retries and the SDK's connection pool are shared."""

    def __init__(self, inner: LLMClient, *, charge: Callable[[], object]) -> None:  # no super(): no second SDK client
        self.config = inner.config
        self._sleep = inner._sleep
        self._client = inner._client
        self._charge = charge

    def complete(self, **kwargs: Any) -> LLMResult:  # type: ignore[override]
        self._charge()
        return super().complete(**kwargs)


def _to_result(response: Any, *, model: str, started: float, attempts: int, task: str) -> LLMResult:
    choices = getattr(response, "choices", None) or []
    if not choices or getattr(choices[0], "message", None) is None:
        raise LLMPermanentError(f"{task}: response has no choices")
    text = choices[0].message.content
    if not isinstance(text, str):
        raise LLMPermanentError(f"{task}: response message has no text content")
    usage = getattr(response, "usage", None)
    return LLMResult(
        text=text,
        model=getattr(response, "model", None) or model,
        latency_s=time.monotonic() - started,
        attempts=attempts,
        prompt_tokens=getattr(usage, "prompt_tokens", None),
        completion_tokens=getattr(usage, "completion_tokens", None),
        total_tokens=getattr(usage, "total_tokens", None),
        finish_reason=getattr(choices[0], "finish_reason", None),
    )


def _describe(exc: Exception) -> str:
    import openai  # deferred (see LLMClient.__init__); already loaded once a call was made

    if isinstance(exc, openai.APITimeoutError):
        return "timeout"
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}"
    if isinstance(exc, openai.APIConnectionError):
        return "connection error"
    return type(exc).__name__


def _retry_after(exc: Exception | None) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    value = headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


# --- Parsing helpers -------------------------------------------------------------------

FENCE_RE = re.compile(r"^\s*```\w*\s*$")

# Markdown decoration that models like to add around a verdict line.
_EMPHASIS_RE = re.compile(r"[*_`#>]+")
_FINAL_DECISION_RE = re.compile(
    r"^\s*final\s+decision\s*[:\-\u2013\u2014=]?\s*(yes|no)\s*[.!,;:)\]]*\s*$", re.IGNORECASE
)


def answer_lines(text: str) -> list[str]:
    """The answer's non-empty lines, without code-fence lines."""
    return [ln for ln in text.splitlines() if ln.strip() and not FENCE_RE.match(ln)]


def last_line(text: str) -> str:
    """The answer's last non-empty line (code fences aside), or ""."""
    lines = answer_lines(text)
    return lines[-1] if lines else ""


def parse_decision_line(line: str) -> bool | None:
    """True/False when `line` is a "Final decision: yes|no" line, else None."""
    match = _FINAL_DECISION_RE.match(_EMPHASIS_RE.sub("", line))
    return match.group(1).lower() == "yes" if match else None


def parse_final_decision(text: str) -> bool | None:
    """True/False from the answer's LAST non-empty line, which must be "Final decision: yes|no"
    (the position the prompts ask for); None otherwise. A decision line anywhere else (the model
    quoting the post, a note or a passage that contains one) never counts.

    Tolerates case, markdown emphasis (**, __, `), heading/quote markers, trailing punctuation
    and a closing code fence. A line such as "Final decision: yes or no" does not count.
    """
    return parse_decision_line(last_line(text))


_INT_RE = re.compile(r"(?<![\w.])-?\d+(?!\.\d|\w)")


def parse_single_integer(text: str, *, lo: int | None = None, hi: int | None = None) -> int | None:
    """The one integer the answer contains (e.g. "3", "**[3]**", "Index: 3"); else None.

    Several distinct integers, or one outside [lo, hi], give None: never guess.
    """
    values = {int(m) for m in _INT_RE.findall(_EMPHASIS_RE.sub("", text))}
    if len(values) != 1:
        return None
    value = values.pop()
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        return None
    return value


_QUOTES = "\"'\u201c\u201d\u2018\u2019"


def parse_single_line(text: str) -> str | None:
    """The answer as one line, with code fences and wrapping quotes removed; None if the
    answer is empty or spans several non-empty lines."""
    lines = [ln.strip() for ln in answer_lines(text)]
    if len(lines) != 1:
        return None
    line = lines[0]
    if len(line) >= 2 and line[0] in _QUOTES and line[-1] in _QUOTES:
        line = line[1:-1].strip()
    return line or None


def parse_number_only(text: str, *, lo: int | None = None, hi: int | None = None) -> int | None:
    """An answer asked to be "the number only": one line holding one integer in [lo, hi]; an
    answer of several lines (e.g. one that quotes the data) is None, never a guess."""
    line = parse_single_line(text)
    return parse_single_integer(line, lo=lo, hi=hi) if line is not None else None


_BULLET_RE = re.compile(r"^\s*(?:[-*•]|\d+[.)]|\(\d+\))\s*")


def parse_lines(text: str) -> list[str]:
    """Non-empty lines with list bullets/numbering and wrapping quotes removed."""
    out = []
    for raw in text.splitlines():
        if FENCE_RE.match(raw):
            continue
        line = _BULLET_RE.sub("", raw).strip()
        if len(line) >= 2 and line[0] in _QUOTES and line[-1] in _QUOTES:
            line = line[1:-1].strip()
        if line:
            out.append(line)
    return out
