"""celkeeper serve's start-up choices that need no server: the user /v1/mutate leaves alone
(--self-username, else the pod's service account as its token names it). Serving itself is tested in
tests/webhook (tests/support/serve.py runs the real command)."""

from __future__ import annotations

import argparse
import base64
import json
from pathlib import Path

import pytest

from celkeeper.cli import serve


def _token(claims: object) -> str:
    def part(value: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256', 'kid': 'k'})}.{part(claims)}.c2lnbmF0dXJl"


def test_a_service_account_token_names_its_user() -> None:
    sub = "system:serviceaccount:celkeeper-system:celkeeper-webhook"
    claims = {"iss": "https://kubernetes.default.svc", "sub": sub, "aud": ["x"]}
    assert serve.service_account_username(_token(claims) + "\n") == sub


@pytest.mark.parametrize(
    "token",
    [
        "",
        "not-a-jwt",
        "a.!!!.c",
        _token(["sub"]),
        _token({"sub": "alice"}),
        _token({"sub": "system:serviceaccount:ns"}),
        _token({"sub": 7}),
    ],
)
def test_a_token_naming_no_service_account_names_nobody(token: str) -> None:
    assert serve.service_account_username(token) == ""


def _args(**given: object) -> argparse.Namespace:
    values: dict[str, object] = {"self_username": None, "source": "kubernetes", "kubeconfig": None}
    values.update(given)
    return argparse.Namespace(**values)


def test_the_self_username_comes_from_the_flag_else_the_pods_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = tmp_path / "token"
    token.write_text(_token({"sub": "system:serviceaccount:ck:webhook"}))
    monkeypatch.setattr(serve, "SERVICE_ACCOUNT_TOKEN", str(token))
    assert serve._self_username(_args()) == "system:serviceaccount:ck:webhook"
    assert serve._self_username(_args(self_username="bob")) == "bob"
    assert serve._self_username(_args(self_username="")) == ""
    # out of the cluster (a kubeconfig, or policies from a folder) nobody is the webhook's own user
    assert serve._self_username(_args(kubeconfig="/k")) == ""
    assert serve._self_username(_args(source="folder")) == ""
    monkeypatch.setattr(serve, "SERVICE_ACCOUNT_TOKEN", str(tmp_path / "absent"))
    assert serve._self_username(_args()) == ""
