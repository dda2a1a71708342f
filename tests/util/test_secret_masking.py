"""Secrets said in a conversation are masked before it is archived (memclaw.util.redact.mask_secrets): by their shape
(provider keys, tokens), by what names them ("my password is ..."), and every secret memclaw knows. Ordinary talk
about keys, tokens and passwords is left alone."""

from __future__ import annotations

import pytest

from memclaw.util.redact import MASK, mask_secrets

# Realistic shapes (none of these is a live credential; AWS's are its documented examples).
OPENAI = "sk-proj-" + "Zq3xT9bK2mW7vR4nY8pL1sD6fG0hJ5aC" + "_e2Qw-Xy7"
ANTHROPIC = "sk-ant-api03-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0" + "-AbCdEf"
GITHUB = "ghp_" + "16C7e42F292c6912E7710c838347Ae178B4a"
GITHUB_PAT = "github_pat_11ABCDEFG0" + "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ"
AWS_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6Ik1heWEifQ."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
SLACK = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (f"my OpenAI key is {OPENAI}, keep it safe", OPENAI),
        (f"export ANTHROPIC_API_KEY={ANTHROPIC}", ANTHROPIC),
        (f"the deploy token: {GITHUB}", GITHUB),
        (f"use {GITHUB_PAT} for the CI", GITHUB_PAT),
        (f"aws_access_key_id = {AWS_ID}", AWS_ID),
        (f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET),
        (f"curl -H 'Authorization: Bearer {JWT}' https://api.example.com", JWT),
        ("Authorization: Bearer 9f8e7d6c5b4a39281706f5e4", "9f8e7d6c5b4a39281706f5e4"),
        (f"slack bot {SLACK}", SLACK),
        ("my password is hunter2", "hunter2"),
        ("My password for the bank is Tr0ub4dor&3, remember it", "Tr0ub4dor&3"),
        ('the wifi password is "correct horse battery staple" btw', "correct horse battery staple"),
        ("PIN: 4711", "4711"),
        ("my passphrase is purple monkey dishwasher. Thanks", "purple monkey dishwasher"),
        ("pg at postgres://maya:s3cretpw@db.local/app", "s3cretpw"),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n-----END OPENSSH PRIVATE KEY-----",
            "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU",
        ),
    ],
)
def test_secrets_are_masked_and_the_sentence_kept(text, secret):
    out = mask_secrets(text)
    assert secret not in out and MASK in out
    words = [w for w in text.replace(secret, " ").split() if len(w) > 3 and w.isalpha() and w.islower()]
    assert all(w in out for w in words), out  # the rest of what was said stays


@pytest.mark.parametrize(
    "text",
    [
        "The secret is patience",
        "The token is expired, can you renew it?",
        "a bearer of bad news",
        "Keys: the front door and the garage",
        "My password manager is great",
        "The context window is 8192 tokens",
        "sk-learn is what she uses for the model",
        "Skiing is sk-fun in Tignes",
        "the primary key is the user id",
        "ASK AKIA about the plan",
    ],
)
def test_ordinary_talk_about_keys_and_passwords_is_left_alone(text):
    assert mask_secrets(text) == text


def test_known_secrets_are_masked_whatever_their_shape(monkeypatch):
    monkeypatch.setenv("BILLING_SERVICE_TOKEN", "plain-looking-but-set")  # the environment's secrets are known
    assert mask_secrets("it is plain-looking-but-set") == f"it is {MASK}"
