"""Automation: "find evidence for me" (queries → search → pool → utility rounds)."""
