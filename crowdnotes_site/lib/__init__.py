"""Pure cores: no Django, no app imports (import-linter contract "pure cores"). Each module loads and
is testable in a plain Python process (tests/test_pure_imports.py)."""
