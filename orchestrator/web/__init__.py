"""The browser side of a room (`orchestrator serve`): the host that keeps every room of a store running,
each room's numbered event feed, and the pages and HTTP API over them (an optional extra: `serve`)."""
