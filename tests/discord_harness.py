"""Drive memclaw's Discord gateway with discord.py's REAL objects, without a network.

- Guilds, channels, threads, users and messages are built from gateway payload dicts (the JSON Discord sends)
  through discord.py's own `ConnectionState`, exactly as discord.py builds them from a live gateway.
- Outgoing REST calls (send message, typing, attachment download) go through discord.py's transport seam,
  `HTTPClient.request` / `HTTPClient.get_from_cdn`, replaced on the client's http object by a recorder that
  answers with realistic JSON. Interaction responses go through discord.py's webhook transport seam
  (`AsyncWebhookAdapter.request`), recorded the same way. memclaw's code is not patched.
- For the whole lifecycle (login, connect, events, reconnects, shutdown) `FakeGateway` is a Discord gateway on
  127.0.0.1: a real websocket server speaking the gateway protocol (HELLO, IDENTIFY/READY, heartbeats, RESUME,
  RECONNECT, INVALID_SESSION, dispatches). discord.py's `HTTPClient.ws_connect` is pointed at it; everything
  above the socket (DiscordWebSocket, the keep-alive, Client.connect's reconnect loop) is discord.py's own.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import discord
import yarl
from aiohttp import WSMsgType, web
from discord.webhook import async_ as webhook_async

_ids = itertools.count(1_300_000_000_000_000_000)


def snowflake() -> int:
    return next(_ids)


def _now() -> str:
    return datetime.now(UTC).isoformat()


def user_payload(uid: int, name: str, *, bot: bool = False) -> dict[str, Any]:
    return {
        "id": str(uid),
        "username": name,
        "discriminator": "0",
        "global_name": name.title(),
        "avatar": None,
        "bot": bot,
    }


@dataclass
class Call:
    method: str
    path: str  # the route template, e.g. /channels/{channel_id}/messages
    url: str
    json: dict[str, Any] | None = None
    channel_id: int | None = None
    at: float = field(default_factory=time.perf_counter)  # when discord.py made the call


@dataclass
class Recorder:
    """What discord.py tried to send, in order."""

    bot: dict[str, Any]
    calls: list[Call] = field(default_factory=list)
    cdn: dict[str, bytes] = field(default_factory=dict)
    fail_next_send: int = 0  # answer that many message POSTs with HTTP 500
    login_status: int = 200  # what GET /users/@me (the token check at login) answers

    # discord.http.HTTPClient.request
    async def request(self, route: discord.http.Route, *, files: Any = None, form: Any = None, **kw: Any) -> Any:
        payload = kw.get("json")
        if payload is None and form:
            import json as _json

            for part in form:
                if part.get("name") == "payload_json":
                    payload = _json.loads(part["value"])
        call = Call(route.method, route.path, route.url, payload, route.channel_id)
        self.calls.append(call)
        await asyncio.sleep(0)  # a real request yields to the loop
        if route.method == "GET" and route.path == "/users/@me":
            if self.login_status != 200:
                raise discord.HTTPException(_FakeResponse(self.login_status), {"message": "401: Unauthorized"})
            return self.bot
        if route.method == "GET" and route.path == "/oauth2/applications/@me":  # Client.login's app info
            return self.app_info()
        if route.method == "PUT" and route.path.endswith("/commands"):  # slash-command sync
            app_id = route.url.split("/applications/", 1)[1].split("/", 1)[0]
            return [dict(c, id=str(snowflake()), application_id=app_id, version="1") for c in (payload or [])]
        if route.method == "POST" and route.path == "/channels/{channel_id}/messages":
            if self.fail_next_send:
                self.fail_next_send -= 1
                raise discord.HTTPException(_FakeResponse(500), {"message": "scripted failure", "code": 0})
            return self.message_payload(route.channel_id, payload or {})
        return None

    async def get_from_cdn(self, url: str) -> bytes:
        self.calls.append(Call("GET", "cdn", url))
        try:
            return self.cdn[url]
        except KeyError:
            raise discord.NotFound(_FakeResponse(404), {"message": "404: Not Found", "code": 0}) from None

    def app_info(self) -> dict[str, Any]:
        return {
            "id": self.bot["id"],
            "name": self.bot["username"],
            "description": "",
            "icon": None,
            "bot_public": False,
            "bot_require_code_grant": False,
            "owner": user_payload(snowflake(), "app-owner"),
            "verify_key": "0" * 64,
            "flags": 0,
        }

    def message_payload(self, channel_id: int | None, body: dict[str, Any]) -> dict[str, Any]:
        ref = body.get("message_reference")
        return {
            "id": str(snowflake()),
            "channel_id": str(channel_id),
            "author": self.bot,
            "content": body.get("content") or "",
            "timestamp": _now(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 19 if ref else 0,
            **({"message_reference": ref} if ref else {}),
        }

    # ----- views over the calls ----------------------------------------------------------------------------
    def sent(self, channel_id: int | None = None) -> list[Call]:
        return [
            c
            for c in self.calls
            if c.method == "POST"
            and c.path == "/channels/{channel_id}/messages"
            and (channel_id is None or c.channel_id == channel_id)
        ]

    def sent_texts(self, channel_id: int | None = None) -> list[str]:
        return [(c.json or {}).get("content", "") for c in self.sent(channel_id)]

    def typing(self, channel_id: int | None = None) -> list[Call]:
        return [
            c
            for c in self.calls
            if c.path == "/channels/{channel_id}/typing" and (channel_id is None or c.channel_id == channel_id)
        ]


class _FakeResponse:
    """The minimal aiohttp-response shape discord.HTTPException reads (status and reason)."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.reason = "scripted"


class RecordingWebhookAdapter(webhook_async.AsyncWebhookAdapter):
    """discord.py's webhook transport (interaction responses and follow-ups) with the network replaced."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[Call] = []

    async def request(
        self, route: Any, session: Any = None, *, payload: Any = None, multipart: Any = None, **kw: Any
    ) -> Any:
        body = payload
        if body is None and multipart:
            import json as _json

            for part in multipart:
                if part.get("name") == "payload_json":
                    body = _json.loads(part["value"])
        self.calls.append(Call(route.method, route.url, route.url, body))
        await asyncio.sleep(0)
        data = (body or {}).get("data", body) or {}
        if route.url.endswith("/callback"):  # the interaction response
            iid = route.url.rsplit("/interactions/", 1)[1].split("/", 1)[0]
            rtype = int((body or {}).get("type", 4))
            ephemeral = bool(int(data.get("flags", 0)) & 64)
            msg = self.message(data) if rtype == 4 else None
            out: dict[str, Any] = {
                "interaction": {
                    "id": iid,
                    "type": 2,
                    "response_message_loading": rtype == 5,
                    "response_message_ephemeral": ephemeral,
                    **({"response_message_id": msg["id"]} if msg else {}),
                },
                "resource": {"type": rtype, **({"message": msg} if msg else {})},
            }
            return out
        if route.method == "POST":  # a follow-up through the interaction webhook
            return self.message(data)
        return None

    def message(self, data: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": str(snowflake()),
            "channel_id": str(snowflake()),
            "author": user_payload(1, "webhook", bot=True),
            "content": data.get("content") or "",
            "timestamp": _now(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 20,
            "flags": int(data.get("flags", 0)),
        }

    def texts(self) -> list[str]:
        out = []
        for c in self.calls:
            b = c.json or {}
            data = b.get("data", b)
            if isinstance(data, dict) and data.get("content"):
                out.append(data["content"])
        return out

    def flags(self) -> list[int]:
        out = []
        for c in self.calls:
            b = c.json or {}
            data = b.get("data", b)
            if isinstance(data, dict) and "flags" in data:
                out.append(int(data["flags"]))
        return out


class DiscordWorld:
    """A bot user, guilds, channels and people, all real discord.py objects built through its ConnectionState."""

    def __init__(self, client: discord.Client, *, bot_id: int | None = None, bot_name: str = "memclaw") -> None:
        self.client = client
        self.state = client._connection
        self.bot_id = bot_id or snowflake()
        self.bot = user_payload(self.bot_id, bot_name, bot=True)
        self.state.user = discord.ClientUser(state=self.state, data=self.bot)
        self.recorder = Recorder(self.bot)
        http = client.http
        http.request = self.recorder.request  # discord.py's REST transport seam
        http.get_from_cdn = self.recorder.get_from_cdn
        self.webhooks = RecordingWebhookAdapter()
        self._webhook_token: Any = None
        self.users: dict[int, dict[str, Any]] = {}
        self.application_id = snowflake()

    def close(self) -> None:
        """Undo the webhook-adapter seam (also done on leaving `async with`)."""
        if self._webhook_token is not None:
            webhook_async.async_context.reset(self._webhook_token)
            self._webhook_token = None

    async def __aenter__(self) -> DiscordWorld:
        """Bind the client to the running loop the way `async with client:` does (no login, no gateway), and
        route interaction responses made in this task to the recording webhook adapter."""
        self._webhook_token = webhook_async.async_context.set(self.webhooks)
        await self.client.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()
        await self.client.__aexit__(*exc)

    # ----- entities ----------------------------------------------------------------------------------------
    def user(self, name: str, uid: int | None = None) -> int:
        uid = uid or snowflake()
        self.users[uid] = user_payload(uid, name)
        return uid

    def guild(
        self,
        name: str = "guild",
        channels: tuple[str, ...] = ("general",),
        *,
        gid: int | None = None,
        channel_ids: dict[str, int] | None = None,
    ) -> tuple[int, dict[str, int]]:
        """A guild (with the bot as a member) and its text channels; ids may be chosen up front for configs."""
        gid = gid or snowflake()
        chans = {n: (channel_ids or {}).get(n) or snowflake() for n in channels}
        data = {
            "id": str(gid),
            "name": name,
            "owner_id": str(snowflake()),
            "icon": None,
            "features": [],
            "emojis": [],
            "stickers": [],
            "roles": [
                {
                    "id": str(gid),
                    "name": "@everyone",
                    "permissions": "1071698660929",
                    "position": 0,
                    "color": 0,
                    "hoist": False,
                    "managed": False,
                    "mentionable": False,
                    "flags": 0,
                }
            ],
            "channels": [
                {
                    "id": str(cid),
                    "type": 0,
                    "guild_id": str(gid),
                    "name": n,
                    "position": i,
                    "permission_overwrites": [],
                    "nsfw": False,
                    "parent_id": None,
                }
                for i, (n, cid) in enumerate(chans.items())
            ],
            "threads": [],
            "members": [{"user": self.bot, "roles": [], "joined_at": _now(), "deaf": False, "mute": False, "flags": 0}],
            "member_count": 2,
            "verification_level": 0,
            "default_message_notifications": 0,
            "explicit_content_filter": 0,
            "mfa_level": 0,
            "premium_tier": 0,
            "preferred_locale": "en-US",
            "nsfw_level": 0,
            "system_channel_flags": 0,
        }
        self.state._add_guild_from_data(data)
        return gid, chans

    def thread(self, guild_id: int, parent_id: int, name: str = "thread") -> int:
        tid = snowflake()
        guild = self.state._get_guild(guild_id)
        assert guild is not None
        data = {
            "id": str(tid),
            "type": 11,
            "guild_id": str(guild_id),
            "parent_id": str(parent_id),
            "owner_id": str(snowflake()),
            "name": name,
            "thread_metadata": {
                "archived": False,
                "auto_archive_duration": 1440,
                "archive_timestamp": _now(),
                "locked": False,
            },
            "message_count": 0,
            "member_count": 1,
            "rate_limit_per_user": 0,
        }
        guild._add_thread(discord.Thread(guild=guild, state=self.state, data=data))
        return tid

    # ----- messages ----------------------------------------------------------------------------------------
    def message_payload(
        self,
        author: int,
        content: str,
        *,
        channel_id: int | None = None,
        guild_id: int | None = None,
        mention_bot: bool = False,
        reply_to: dict[str, Any] | None = None,
        attachments: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        author_data = self.users.get(author) or (self.bot if author == self.bot_id else user_payload(author, "x"))
        if mention_bot:
            content = f"<@{self.bot_id}> {content}"
        data: dict[str, Any] = {
            "id": str(snowflake()),
            "channel_id": str(channel_id or snowflake()),
            "author": author_data,
            "content": content,
            "timestamp": _now(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [self.bot] if mention_bot else [],
            "mention_roles": [],
            "attachments": attachments or [],
            "embeds": [],
            "pinned": False,
            "type": 0,
        }
        if guild_id is not None:
            data["guild_id"] = str(guild_id)
            data["member"] = {"roles": [], "joined_at": _now(), "deaf": False, "mute": False, "flags": 0}
        if reply_to is not None:
            data["type"] = 19
            data["message_reference"] = {
                "message_id": reply_to["id"],
                "channel_id": reply_to["channel_id"],
                **({"guild_id": str(guild_id)} if guild_id else {}),
            }
            data["referenced_message"] = reply_to
        return data

    def dm(self, author: int, content: str, *, channel_id: int | None = None, **kw: Any) -> discord.Message:
        """A DM from `author`, parsed by discord.py's ConnectionState as from MESSAGE_CREATE."""
        return self.parse(self.message_payload(author, content, channel_id=channel_id or self.dm_channel(author), **kw))

    def dm_channel(self, author: int) -> int:
        key = ("dm", author)
        if not hasattr(self, "_dms"):
            self._dms: dict[tuple[str, int], int] = {}
        return self._dms.setdefault(key, snowflake())

    def guild_message(self, author: int, content: str, *, guild_id: int, channel_id: int, **kw: Any) -> discord.Message:
        return self.parse(self.message_payload(author, content, channel_id=channel_id, guild_id=guild_id, **kw))

    def parse(self, payload: dict[str, Any]) -> discord.Message:
        """Build the Message the way discord.py's parse_message_create does (channel resolved through state)."""
        channel, _ = self.state._get_guild_channel(payload)
        return discord.Message(state=self.state, channel=channel, data=payload)  # type: ignore[arg-type]

    def attachment(self, filename: str, data: bytes, content_type: str | None) -> dict[str, Any]:
        aid = snowflake()
        url = f"https://cdn.discordapp.com/attachments/1/{aid}/{filename}"
        self.recorder.cdn[url] = data
        out: dict[str, Any] = {"id": str(aid), "filename": filename, "size": len(data), "url": url, "proxy_url": url}
        if content_type:
            out["content_type"] = content_type
        return out

    # ----- interactions ------------------------------------------------------------------------------------
    def interaction(
        self,
        user: int,
        name: str,
        options: dict[str, str] | None = None,
        *,
        guild_id: int | None = None,
        channel_id: int | None = None,
    ) -> discord.Interaction:
        """An APPLICATION_COMMAND interaction built from its gateway payload."""
        channel_id = channel_id or self.dm_channel(user)
        data: dict[str, Any] = {
            "id": str(snowflake()),
            "application_id": str(self.application_id),
            "type": 2,
            "token": "interaction-token-" + str(snowflake()),
            "version": 1,
            "locale": "en-US",
            "app_permissions": "0",
            "attachment_size_limit": 10_000_000,
            "entitlements": [],
            "authorizing_integration_owners": {},
            "channel_id": str(channel_id),
            "channel": {"id": str(channel_id), "type": 1 if guild_id is None else 0},
            "data": {
                "id": str(snowflake()),
                "name": name,
                "type": 1,
                "options": [{"name": k, "type": 3, "value": v} for k, v in (options or {}).items()],
            },
        }
        if guild_id is None:
            data["user"] = self.users[user]
            data["context"] = 1
        else:
            data["guild_id"] = str(guild_id)
            data["member"] = {
                "user": self.users[user],
                "roles": [],
                "joined_at": _now(),
                "deaf": False,
                "mute": False,
                "flags": 0,
                "permissions": "0",
            }
            data["context"] = 0
        return discord.Interaction(data=data, state=self.state)


class FakeGateway:
    """A Discord gateway on 127.0.0.1 (an aiohttp websocket server); point a client at it with `connect_to()`.

    It speaks the gateway protocol in JSON text frames: HELLO on connect, READY after IDENTIFY, RESUMED after
    RESUME, heartbeat ACKs; `dispatch()` sends any event (e.g. MESSAGE_CREATE), `reconnect()` sends op 7
    RECONNECT and `invalidate()` op 9 INVALID_SESSION (not resumable), like Discord does. Everything the client
    sent is kept in `received` (IDENTIFY carries the token: tests check it arrived there and nowhere else)."""

    def __init__(self, bot: dict[str, Any]) -> None:
        self.bot = bot
        self.received: list[dict[str, Any]] = []
        self.connections = 0
        self.identified = 0
        self.resumed = 0
        self.seq = 0
        self.session_id = ""
        self.url = ""
        self._ws: web.WebSocketResponse | None = None
        self._runner: web.AppRunner | None = None
        self._changed = asyncio.Condition()

    async def start(self) -> FakeGateway:
        app = web.Application()
        app.router.add_get("/", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"ws://127.0.0.1:{port}/"
        return self

    async def stop(self) -> None:
        if self._ws is not None and not self._ws.closed:
            await self._ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def wait_for(self, predicate: Any) -> None:
        """Wait until `predicate()` holds (checked whenever the gateway sees something)."""
        async with self._changed:
            await self._changed.wait_for(predicate)

    async def _send(self, op: int, d: Any, t: str | None = None) -> None:
        assert self._ws is not None
        frame: dict[str, Any] = {"op": op, "d": d, "s": None, "t": t}
        if op == 0:
            self.seq += 1
            frame["s"] = self.seq
        await self._ws.send_str(json.dumps(frame))

    async def _handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._ws = ws
        self.connections += 1
        await self._send(10, {"heartbeat_interval": 41250})
        await self._notify()
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                continue
            frame = json.loads(msg.data)
            self.received.append(frame)
            op = frame.get("op")
            if op == 1:
                await self._send(11, None)
            elif op == 2:
                self.identified += 1
                self.session_id = f"session-{self.identified}"
                await self._send(
                    0,
                    {
                        "v": 10,
                        "user": self.bot,
                        "guilds": [],
                        "session_id": self.session_id,
                        "resume_gateway_url": self.url,
                        "application": {"id": self.bot["id"], "flags": 0},
                        "shard": [0, 1],
                    },
                    "READY",
                )
            elif op == 6:
                self.resumed += 1
                await self._send(0, {}, "RESUMED")
            await self._notify()
        await self._notify()
        return ws

    async def dispatch(self, event: str, data: dict[str, Any]) -> None:
        await self._send(0, data, event)

    async def reconnect(self) -> None:
        await self._send(7, None)

    async def invalidate(self) -> None:
        await self._send(9, False)

    def sent_tokens(self) -> list[str]:
        return [f["d"]["token"] for f in self.received if f.get("op") in (2, 6)]


def connect_to(world: DiscordWorld, gateway: FakeGateway) -> None:
    """Point discord.py's websocket transport (`HTTPClient.ws_connect`) at `gateway`, keeping the query string
    discord.py builds (v, encoding, compress)."""
    http = world.client.http
    real = http.ws_connect

    async def ws_connect(url: str, *, compress: int = 0) -> Any:
        local = yarl.URL(gateway.url).with_query(yarl.URL(url).query)
        return await real(str(local), compress=compress)

    http.ws_connect = ws_connect
