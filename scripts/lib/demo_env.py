"""Print the settings the demo runs with (scripts/demo.sh writes them to var/demo.env for
scripts/manage.sh): every variable settings.py reads that is set in this environment, as
NAME=value lines quoted for bash, except secrets (names with KEY, SECRET, TOKEN or PASSWORD, and
URLs that carry a password), which stay in the environment of each shell."""

from __future__ import annotations

import os
import re
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path

SETTINGS = Path(__file__).resolve().parents[2] / "crowdnotes_site" / "settings.py"
SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|PASSWORD")
PASSWORD_IN_URL = re.compile(r"://[^/@]*:[^/@]*@")


def main() -> None:
    names = sorted(
        set(re.findall(r"\"([A-Z][A-Z0-9_]{2,})\"", SETTINGS.read_text()))
        | {"DJANGO_SETTINGS_MODULE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"}
    )
    lines = [
        f"# Written by scripts/demo.sh at {datetime.now(tz=UTC):%Y-%m-%dT%H:%M:%SZ}: the settings the running demo uses."
    ]
    for name in names:
        value = os.environ.get(name)
        if value is None or SECRET_NAME.search(name) or PASSWORD_IN_URL.search(value):
            continue
        lines.append(f"{name}={shlex.quote(value)}")
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
