"""One module per dashboard tab; each is a QWidget with `refresh(snapshot)` called by the window's timer."""
