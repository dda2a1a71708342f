"""Images of a message as OpenAI `image_url` parts (base64 data URLs), checked by their magic bytes and size."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from memclaw.util.safepath import read_regular

log = logging.getLogger(__name__)

MAX_IMAGE_BYTES = 20 * 1024 * 1024

_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def image_mime(data: bytes) -> str | None:
    for magic, mime in _MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def image_part(item: Path | str | bytes) -> dict[str, Any] | None:
    """An image as an OpenAI `image_url` part with a base64 data URL; None (and a log line) when the file is
    unreadable, too large or not a PNG/JPEG/GIF/WEBP image."""
    import base64

    label = "attached bytes" if isinstance(item, bytes) else str(item)
    if isinstance(item, bytes):
        data = item
    else:
        path = Path(item)
        try:
            if path.stat().st_size > MAX_IMAGE_BYTES:
                log.warning("skipping image %s: larger than %d MB", label, MAX_IMAGE_BYTES // 2**20)
                return None
            data = read_regular(path, MAX_IMAGE_BYTES + 1, follow=True)
        except OSError as e:
            log.warning("skipping image %s: cannot read it (%s)", label, e.strerror or e)
            return None
    if len(data) > MAX_IMAGE_BYTES:
        log.warning("skipping image %s: larger than %d MB", label, MAX_IMAGE_BYTES // 2**20)
        return None
    mime = image_mime(data)
    if mime is None:
        log.warning("skipping attachment %s: not a PNG, JPEG, GIF or WEBP image", label)
        return None
    url = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
    return {"type": "image_url", "image_url": {"url": url}}
