"""The context inspector: server-rendered pages that show what the model saw, turn by turn."""

from __future__ import annotations

from gateway.ui.pages import ui_router

__all__ = ["ui_router"]
