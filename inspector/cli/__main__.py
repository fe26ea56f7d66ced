"""`python -m inspector.cli`: the same as the `inspector` command."""
from . import main

raise SystemExit(main())
