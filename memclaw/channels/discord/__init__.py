"""The Discord channel: the gateway (discord.py) and its errors in memclaw's words."""
