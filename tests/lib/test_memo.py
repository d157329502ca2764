"""crowdnotes_site/lib/memo.py: the in-process cache behind the home list and the audit list."""

from __future__ import annotations

from crowdnotes_site.lib.memo import Memo, content_key


def test_a_part_is_built_once_per_key_and_the_least_recently_used_goes_first() -> None:
    built: list[str] = []
    memo: Memo[str] = Memo(size=2)

    def build(key: str) -> str:
        built.append(key)
        return key.upper()

    def get(key: str) -> str:
        return memo.get_or_build(key, lambda: build(key)).value

    assert [get("a"), get("a"), get("b")] == ["A", "A", "B"] and built == ["a", "b"]
    get("a")  # "b" is now the least recently used
    get("c")
    get("a")
    get("b")  # evicted: built again
    assert built == ["a", "b", "c", "b"]


def test_a_part_older_than_the_max_age_is_built_again() -> None:
    memo: Memo[int] = Memo(max_age_s=0)
    counter = iter(range(10))
    first = memo.get_or_build("k", lambda: next(counter))
    second = memo.get_or_build("k", lambda: next(counter))
    assert (first.value, first.hit, second.value, second.hit) == (0, False, 1, False)
    kept: Memo[int] = Memo(max_age_s=60)
    kept.get_or_build("k", lambda: 1)
    again = kept.get_or_build("k", lambda: 2)
    assert (again.value, again.hit) == (1, True)


def test_the_content_key_changes_with_any_value() -> None:
    rows = [(1, "text", "NEEDS_MORE_RATINGS")]
    assert content_key(1, rows) == content_key(1, [(1, "text", "NEEDS_MORE_RATINGS")])
    assert content_key(1, rows) != content_key(1, [(1, "text", "CURRENTLY_RATED_HELPFUL")])
    assert content_key(1, rows) != content_key(2, rows)
