"""MCP servers for the tests, written with the official SDK: one program, one behaviour per mode.

`python server.py MODE` serves stdio; `python server.py http PORT` serves streamable HTTP on 127.0.0.1
under hypercorn's trio worker (the SDK's own HTTP runner is asyncio-only).
"""
import base64
import os
import signal
import sys
import time


def misbehave(mode: str) -> None:
    """The servers that fail before any SDK code would run (so they fail fast, as real ones do)."""
    if mode == "crash":
        print("Traceback (most recent call last):\nImportError: no module named 'secret_sauce'", file=sys.stderr,
              flush=True)
        sys.exit(1)
    if mode == "silent":  # reads forever, answers nothing
        for _ in sys.stdin:
            pass
        time.sleep(3600)
    if mode == "garbage":  # not an MCP server at all: chatter on stdout
        for line in sys.stdin:
            print(f"hello! you said {len(line)} bytes; I speak no JSON", flush=True)
        sys.exit(0)


if __name__ == "__main__":
    misbehave(sys.argv[1] if len(sys.argv) > 1 else "normal")

import trio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.utilities.types import Image
from mcp_types import ResourceLink, TextContent, ToolAnnotations

# a 1x1 transparent PNG
PIXEL = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")


def build(mode: str):
    server = MCPServer("testserver")
    read_only = ToolAnnotations(readOnlyHint=True)

    @server.tool(description="Look a word up in a tiny dictionary.", annotations=read_only)
    def lookup(word: str) -> str:
        print(f"lookup {word}", file=sys.stderr, flush=True)
        return {"trio": "a structured concurrency library"}.get(word, f"no entry for {word!r}")

    @server.tool(description="Sleep, then answer.", annotations=read_only)
    async def slow(seconds: float, ctx: Context) -> str:
        await ctx.report_progress(0, seconds)
        await trio.sleep(seconds)
        return f"slept {seconds}"

    @server.tool(description="Always fails.")
    def fail(reason: str = "broken") -> str:
        raise ValueError(f"this tool always fails: {reason}")

    @server.tool(description="Adds two numbers; the sum is also structured.")
    def add(a: int, b: int) -> dict:
        return {"sum": a + b}

    @server.tool(description="A picture and a link.", annotations=read_only)
    def picture() -> list:
        return [TextContent(type="text", text="here it is"), Image(data=PIXEL, format="png").to_image_content(),
                ResourceLink(type="resource_link", uri="file:///tmp/pixel.png", name="pixel.png",
                             mimeType="image/png")]

    @server.tool(description="How long the TOKEN environment variable is (never the value).", annotations=read_only)
    def token_length() -> int | str:
        token = os.environ.get("TOKEN", "")
        return f"it is {token}, of {len(token)} characters" if mode == "leaky" else len(token)  # leaky: says it

    @server.tool(description="Adds a tool named `echo` and tells the client its tool list changed.")
    async def grow(ctx: Context) -> str:
        server.add_tool(lambda text: text, name="echo", description="Says the text back.")
        await ctx.notify_tools_changed()
        return "grown"

    @server.tool(description="Kills the server process mid-call.")
    def die() -> str:
        os._exit(3)

    if mode == "badschema":
        tool = server._tool_manager.get_tool("lookup")
        tool.parameters = {"type": "object", "properties": {"word": {"type": 12}}, "required": "word"}
    return server


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "normal"
    if mode == "stubborn":  # ignores SIGTERM and outlives its stdin
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print(f"pid {os.getpid()}", file=sys.stderr, flush=True)
    server = build(mode)
    if mode == "http":
        import hypercorn.trio
        from hypercorn.config import Config

        cfg = Config()
        cfg.bind = [f"127.0.0.1:{sys.argv[2]}"]
        cfg.loglevel = "WARNING"
        trio.run(hypercorn.trio.serve, server.streamable_http_app(), cfg)
        return
    import anyio
    anyio.run(server.run_stdio_async, backend="trio")
    if mode == "stubborn":
        time.sleep(3600)


if __name__ == "__main__":
    main()
