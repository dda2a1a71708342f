"""Who may talk to the bot, and where (pure policy)."""

from __future__ import annotations

from memclaw.channels.access import AccessPolicy, MessageFacts, decide
from memclaw.config import Config

OWNER = "111"
ALICE = "222"
EVE = "333"


def policy(**discord) -> AccessPolicy:
    cfg = Config(owners={"discord": [OWNER]}, channels={"discord": discord})
    return AccessPolicy.from_config(cfg)


def dm(author: str) -> MessageFacts:
    return MessageFacts(author_id=author, is_dm=True, channel_id="900")


def guild(author: str, *, g="10", ch="20", parent=None, mention=False, reply=False) -> MessageFacts:
    return MessageFacts(
        author_id=author,
        guild_id=g,
        channel_id=ch,
        parent_channel_id=parent,
        mentions_bot=mention,
        replies_to_bot=reply,
    )


def test_own_messages_always_ignored():
    p = policy(allow_from=[OWNER])
    d = decide(p, MessageFacts(author_id="999", is_self=True, is_dm=True))
    assert not d.allowed and d.reason == "own message"


def test_deny_by_default_only_owner():
    p = policy()
    assert decide(p, dm(OWNER)).allowed and decide(p, dm(OWNER)).is_owner
    assert not decide(p, dm(ALICE)).allowed
    assert "deny by default" in decide(p, dm(ALICE)).reason
    assert decide(p, guild(OWNER, mention=True)).allowed
    assert not decide(p, guild(ALICE, mention=True)).allowed


def test_guild_needs_mention_or_reply():
    p = policy(guilds=["10"])
    assert not decide(p, guild(OWNER)).allowed
    assert "not addressed" in decide(p, guild(OWNER)).reason
    assert decide(p, guild(OWNER, mention=True)).allowed
    assert decide(p, guild(ALICE, reply=True)).allowed


def test_always_answer_channels_and_threads():
    p = policy(always_answer_channels=["20"])
    assert decide(p, guild(ALICE, ch="20")).allowed
    assert decide(p, guild(ALICE, ch="77", parent="20")).allowed  # a thread under it
    assert not decide(p, guild(ALICE, ch="21")).allowed


def test_allow_from_restricts_everyone_but_owner():
    p = policy(allow_from=[ALICE], guilds=["10"])
    assert decide(p, dm(ALICE)).allowed
    assert decide(p, guild(ALICE, mention=True)).allowed
    assert not decide(p, guild(EVE, mention=True)).allowed
    assert "allow_from" in decide(p, guild(EVE, mention=True)).reason
    assert not decide(p, dm(EVE)).allowed
    assert decide(p, dm(OWNER)).allowed


def test_location_lists_apply_to_everyone():
    p = policy(guilds=["10"], channels=["20"])
    assert decide(p, guild(ALICE, mention=True)).allowed
    assert not decide(p, guild(ALICE, g="11", mention=True)).allowed
    assert not decide(p, guild(OWNER, ch="21", mention=True)).allowed  # even the owner
    assert decide(p, guild(ALICE, ch="55", parent="20", mention=True)).allowed
    assert not decide(p, dm(ALICE)).allowed  # guild lists do not open DMs
    assert decide(p, dm(OWNER)).allowed


def test_owner_by_id_never_by_name():
    p = policy()
    assert not p.is_owner("owner") and not p.is_owner("Alice")
    assert p.is_owner(OWNER)


def test_the_owner_rule_is_one_rule_for_access_and_context():
    """Access and the context builder read owner ids the same way (normalize_sender_id): an id written with spaces
    in the config is the owner in both; before, access stripped it and the context builder did not, so the owner
    was let in and then given the outsider's context."""
    from memclaw.context.senders import Sender, is_owner

    cfg = Config(owners={"discord": [" 111 ", ""]})
    policy = AccessPolicy.from_config(cfg)
    for sid in ("111", " 111"):
        assert policy.is_owner(sid)
        assert is_owner(cfg, Sender(channel="discord", sender_id=sid))
    for sid in ("1111", "", "11"):
        assert not policy.is_owner(sid)
        assert not is_owner(cfg, Sender(channel="discord", sender_id=sid))
