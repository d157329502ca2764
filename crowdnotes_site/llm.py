"""The configured LLM client, shared by every app (evidence, judging, notes): built from settings
and the environment by `crowdnotes_site.lib.llm.client.LLMConfig.from_settings`."""

from __future__ import annotations

import os

from django.conf import settings

from crowdnotes_site.lib.llm.client import LLMClient, LLMConfig


def llm_client() -> LLMClient | None:
    """The configured LLM client, or None when LLM_BASE_URL is unset (offline baselines)."""
    config = LLMConfig.from_settings(settings, environ=os.environ)
    if not config.configured:
        return None
    # Building the SDK client loads the TLS trust store (~30 ms): once per configuration.
    key = repr(config)
    client = _clients.get(key)
    if client is None:
        client = _clients[key] = LLMClient(config)
    return client


_clients: dict[str, LLMClient] = {}
