"""`python -m orchestrator`: the same entry point as the console script."""
from orchestrator.cli import main

raise SystemExit(main())
