"""The operator dashboard (PySide6): the only room where Qt is imported.

It reads the engine through inspector's public objects (LineController,
snapshots, the results store, ChatSession) and is never imported by them.
backend.py: where data comes from (a local line, or an attached kiosk);
series.py: chart series from snapshots; tabs/: one module per tab;
window.py: the tabs and the timer; app.py: `inspector gui`;
screenshots.py: the screenshot script (under Xvfb).
"""
