"""The evidence tests' small dated corpus, for the automation mode of the benchmark."""

from tests.evidence.corpus import corpus  # noqa: F401 - a fixture for tests/judging/benchmark/*
