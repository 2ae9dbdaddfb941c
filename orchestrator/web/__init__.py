"""The browser side of a room (`orchestrator serve`): the host that keeps every room of a store running, each
room's numbered event feed, the pages and HTTP API over them, and the guard in front (an optional extra: `serve`)."""
