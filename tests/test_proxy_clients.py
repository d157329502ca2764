"""Client address behind the reverse proxy: limits and the login lockout key on
the address the trusted proxies saw, forged X-Forwarded-For entries are ignored, and a stranger's
wrong passwords cannot lock the real user out."""

from __future__ import annotations

from typing import Any

import pytest
from axes.models import AccessAttempt

from crowdnotes_site.clientip import forwarded_client
from tests.conftest import CsrfClient

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-Passphrase-42"
PROXY = "127.0.0.1"  # REMOTE_ADDR of every request: the one nginx in front of the app


@pytest.fixture(autouse=True)
def _behind_one_proxy(settings: Any) -> None:
    settings.TRUSTED_PROXY_COUNT = 1


@pytest.fixture
def member(make_user: Any) -> Any:
    user = make_user("mallory")
    user.set_password(PASSWORD)
    user.save()
    return user


def _login(client: CsrfClient, password: str, *, forwarded_for: str, username: str = "mallory") -> Any:
    return client.post(
        "/accounts/login/",
        {"username": username, "password": password},
        REMOTE_ADDR=PROXY,
        HTTP_X_FORWARDED_FOR=forwarded_for,
    )


@pytest.mark.parametrize(
    ("header", "hops", "expected"),
    [
        ("203.0.113.7", 0, PROXY),  # reached directly: the header is the client's own claim
        ("203.0.113.7", 1, "203.0.113.7"),
        ("6.6.6.6, 203.0.113.7", 1, "203.0.113.7"),  # forged entry left of what nginx appended
        ("6.6.6.6, 7.7.7.7, 203.0.113.7, 192.0.2.1", 2, "203.0.113.7"),  # CDN then nginx
        ("203.0.113.7", 2, "203.0.113.7"),  # shorter than the trusted chain: the leftmost
        ("", 1, PROXY),
        ("not-an-address", 1, PROXY),
        (" 2001:db8::1 ", 1, "2001:db8::1"),
    ],
)
def test_it_takes_the_client_from_the_trusted_end_of_x_forwarded_for(header: str, hops: int, expected: str) -> None:
    assert forwarded_client(header, PROXY, hops) == expected


def test_a_strangers_wrong_passwords_do_not_lock_the_real_user_out(member: Any, settings: Any) -> None:
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "login": "1000/m"}  # the lockout alone
    stranger = CsrfClient()
    # Each attempt forges a different address in front; nginx appends the stranger's real one.
    statuses = [
        _login(stranger, f"wrong-{i}", forwarded_for=f"10.9.8.{i}, 203.0.113.7").status_code
        for i in range(settings.AXES_FAILURE_LIMIT + 5)
    ]
    assert statuses[: settings.AXES_FAILURE_LIMIT - 1] == [200] * (settings.AXES_FAILURE_LIMIT - 1)
    assert set(statuses[settings.AXES_FAILURE_LIMIT :]) == {429}  # the forged entries did not help
    assert _login(stranger, PASSWORD, forwarded_for="203.0.113.7").status_code == 429
    # A locked client's further attempts are not counted against the account.
    assert sum(AccessAttempt.objects.values_list("failures_since_start", flat=True)) == settings.AXES_FAILURE_LIMIT

    owner = CsrfClient()
    response = _login(owner, PASSWORD, forwarded_for="198.51.100.20")
    assert response.status_code == 302
    assert owner.session["_auth_user_id"] == str(member.pk)


def test_an_account_is_locked_for_everyone_past_the_slower_global_limit(member: Any, settings: Any) -> None:
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "login": "1000/m"}
    settings.AXES_USERNAME_FAILURE_LIMIT = 3 * settings.AXES_FAILURE_LIMIT
    for client_number in range(2):
        client = CsrfClient()
        for i in range(settings.AXES_FAILURE_LIMIT):
            _login(client, f"wrong-{i}", forwarded_for=f"203.0.113.{client_number}")
    # 20 wrong passwords from two clients: the owner elsewhere still gets in (and that resets only their pair).
    assert _login(CsrfClient(), PASSWORD, forwarded_for="198.51.100.20").status_code == 302
    third = CsrfClient()
    for i in range(settings.AXES_FAILURE_LIMIT):
        _login(third, f"wrong-{i}", forwarded_for="203.0.113.99")
    response = _login(CsrfClient(), PASSWORD, forwarded_for="198.51.100.21")
    assert response.status_code == 429
    assert "from many networks together" in response.content.decode()


def test_login_and_sign_up_rates_are_per_client_behind_the_proxy(member: Any, settings: Any) -> None:
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "login": "5/m", "signup": "1/h"}
    noisy = CsrfClient()
    for i in range(5):
        forged = f"10.0.0.{i}, 203.0.113.7"
        assert _login(noisy, "wrong", username=f"someone-{i}", forwarded_for=forged).status_code == 200
    refused = _login(noisy, "wrong", username="someone-else", forwarded_for="10.1.1.1, 203.0.113.7")
    assert refused.status_code == 429
    # Another visitor behind the same proxy has a rate of their own.
    assert _login(CsrfClient(), PASSWORD, forwarded_for="198.51.100.20").status_code == 302

    data = {"password1": PASSWORD, "password2": PASSWORD, "roles": ["Rater"]}
    first = CsrfClient().post(
        "/accounts/signup/", {"username": "first", **data}, REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="203.0.113.7"
    )
    assert first.status_code == 302
    forged = CsrfClient().post(
        "/accounts/signup/",
        {"username": "second", **data},
        REMOTE_ADDR=PROXY,
        HTTP_X_FORWARDED_FOR="10.0.0.1, 203.0.113.7",
    )
    assert forged.status_code == 429
    other = CsrfClient().post(
        "/accounts/signup/", {"username": "third", **data}, REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="198.51.100.20"
    )
    assert other.status_code == 302
