"""Notification messages: what an alert says and how each channel kind wants it (pure
functions, no Django, no network)."""
