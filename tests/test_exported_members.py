"""memclaw's public surface, pinned (in the manner of httpx's test_exported_members.py): every name in
`memclaw.__all__` resolves, is defined inside memclaw, and importing memclaw loads none of the heavy libraries."""

from __future__ import annotations

import subprocess
import sys

import memclaw

EXPECTED = [
    "Agent",
    "AgentReply",
    "BuiltContext",
    "Config",
    "MemclawError",
    "MemoryService",
    "MemoryUnit",
    "RecallHit",
    "RecallResult",
    "Sender",
    "Workspace",
    "__version__",
    "build_messages",
    "load_config",
    "resolve_workspace",
]


def test_all_is_the_pinned_surface():
    assert sorted(memclaw.__all__) == sorted(EXPECTED)


def test_every_exported_name_resolves_to_memclaws_own_object():
    for name in memclaw.__all__:
        value = getattr(memclaw, name)
        if name == "__version__":
            assert isinstance(value, str) and value.count(".") == 2
            continue
        assert value.__module__.startswith("memclaw."), (name, value.__module__)
        assert value.__name__ == name
        assert name in dir(memclaw)


def test_an_unknown_name_is_an_attribute_error():
    try:
        memclaw.NoSuchThing  # noqa: B018
    except AttributeError as e:
        assert "NoSuchThing" in str(e)
    else:
        raise AssertionError("memclaw.NoSuchThing resolved")


def test_importing_memclaw_loads_no_heavy_library():
    code = (
        "import sys, memclaw; heavy = ('litellm', 'chromadb', 'torch', 'onnxruntime', 'sentence_transformers', "
        "'discord', 'rich'); print([m for m in heavy if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
