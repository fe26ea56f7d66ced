"""One module per dashboard tab. Those that follow the line have `refresh(snapshot)`, called by the window's
timer while they are on screen; history searches on demand and the LLM tab streams on its own pump."""
