"""Names vulture reports as unused that are used, each with who uses it (the dead-code check: `make deadcode`).

Read by vulture only, never imported. A line names an attribute as `_.name`; keep one reason per line.
"""

# ruff: noqa: B018, F821

# memclaw/__init__.py: the module's lazy exports (PEP 562)
_.__getattr__
_.__dir__
# bench/locomo.py: fields of the loaded LoCoMo records, kept as the file has them
_.number
_.conversation
_.n_by_category
# channels/discord/gateway.py: discord.py reads the intent flag and VoiceClient's class attributes
_.message_content
_.warn_nacl
_.warn_dave
# channels/discord/gateway.py: DiscordTurn, the record a handled message's future holds
_.message_id
# channels/queue.py: ChannelQueue's state, public beside `pending`
_.closed
# cli/tables.py: rich's Table attribute
_.show_header
# context/sections.py: the tag prompts/context_runtime.md opens with, named for tests and readers
_.RUNTIME_TAG
# embedding/_export.py: torch calls nn.Module.forward
_.forward
# embedding/_onnx.py: onnxruntime SessionOptions fields
_.intra_op_num_threads
_.inter_op_num_threads
_.execution_mode
_.graph_optimization_level
_.log_severity_level
# embedding/_registry.py: a field of registry.toml, checked on load
_.upstream
# embedding/provider.py and llm/client.py: litellm's module settings
_.DEFAULT_MAX_RETRIES
_.disable_hf_tokenizer_download
_.suppress_debug_info
_.drop_params
_.telemetry
# util/markdown_view.py: rich's MarkdownElement class attribute
_.new_line
