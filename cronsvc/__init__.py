"""The cronsvc engine: scheduling and delivery logic that needs no Django."""

__version__ = "0.1.0"
