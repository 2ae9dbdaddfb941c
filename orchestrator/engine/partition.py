"""One agent's partition of a room's history, kept as the model will see it.

Messages are converted once on arrival and token-estimated once (memoised); tool results are
placed right after their own call, so a user line that landed mid-round never splits a pair.

Finished work is not re-read. When a task message reaches the member it is for (dispatch_to, run_worker
and hand_off_to all post one), the tool results of the work it already finished, everything before its
newest reply, are shown from then on as the clearing note; its task lines, its calls and its replies (its
reports, what it concluded) stay whole, so it can run a tool again to re-read a source. This happens once
per task, at its start, so the request prefix changes there and then stays byte-stable for the whole task.
A user line is never such a boundary: an interactive member holding the floor keeps its conversation's
results whole (within the request budget) until its next task or handoff. Results of tools whose text
is an instruction rather than a source (an activated skill) stay whole. Only the view changes: the
stored messages, and `messages` here, keep everything.
"""
from __future__ import annotations

from orchestrator.core.tokens import estimate
from orchestrator.core.types import (
    Message, ModelMessage, TextBlock, ThinkingBlock, ToolCallBlock, ToolResultBlock,
)
from orchestrator.engine.budget import clearable, cleared


def _label(msg: Message) -> str:
    if msg.author == "user":
        return msg.text
    if msg.kind == "task":
        return f"[task from {msg.author}] {msg.text}"
    if msg.kind == "notice":
        return f"[notice] {msg.text}"
    if msg.kind == "summary":
        return msg.text
    return f"[{msg.author}] {msg.text}"


def to_model(msg: Message, viewer: str) -> ModelMessage | None:
    if msg.author == viewer and msg.kind in ("text", "tool_call"):
        return ModelMessage("assistant", list(msg.blocks), msg.provider, msg.model)
    if msg.author == viewer and msg.kind == "tool_result":
        return ModelMessage("user", [b for b in msg.blocks if isinstance(b, ToolResultBlock)])
    text = _label(msg)
    images = [b for b in msg.blocks if not isinstance(b, (TextBlock, ThinkingBlock, ToolCallBlock, ToolResultBlock))]
    if not text and not images:
        return None
    return ModelMessage("user", [TextBlock(text), *images])


def tokens_of(m: ModelMessage) -> int:
    n = 4
    for b in m.blocks:
        if isinstance(b, TextBlock):
            n += estimate(b.text)
        elif isinstance(b, ToolResultBlock):
            n += estimate(b.content) + 8
        elif isinstance(b, ToolCallBlock):
            n += estimate(str(b.input)) + 8
        elif isinstance(b, ThinkingBlock):
            n += estimate(b.thinking)
        else:
            n += 1000  # an image: vendors bill roughly this much for a typical screenshot
    return n


class Partition:
    """The messages one agent may see, and their model view in request order.

    `view`, `sizes` and `ids` run in parallel, so fitting and compaction never re-estimate.
    A summary (compaction) replaces the messages it names, here and after every reload.
    """

    def __init__(self, viewer: str):
        self.viewer = viewer
        self.messages: list[Message] = []
        self.view: list[ModelMessage] = []
        self.sizes: list[int] = []
        self.ids: list[str] = []
        self.tokens = 0
        self.unread = 0  # messages from others since the agent's last model request
        self.read_seq = 0  # the newest seq the agent's last model request held: what its next words answer
        self.ending = False  # a tool of the current round ends the turn (a handoff): no model call follows it
        self._open: dict[str, list[int]] = {}  # call id -> [insert position]; shared per round
        self._summary_of: dict[str, Message] = {}  # replaced message id -> the summary standing for it
        self._replied = 0  # view index just past the viewer's newest reply: its work up to there is finished
        self._settled = 0  # view index up to which finished results are already shown cleared

    def append(self, msg: Message, addressed: bool | None = None) -> None:
        """Add a message the viewer may see. `addressed` says whether it asks for an answer
        (default: anything someone else wrote); only those make a running turn go on."""
        self.messages.append(msg)
        if msg.replaces:
            for rid in msg.replaces:
                self._summary_of[rid] = msg
            self._rebuild()
            return
        if self._place(msg) and (msg.author != self.viewer if addressed is None else addressed):
            self.unread += 1

    def size_of(self, message_id: str) -> int | None:
        """The estimated tokens of a message in the view (newest first: it is usually the last one)."""
        for i in range(len(self.ids) - 1, -1, -1):
            if self.ids[i] == message_id:
                return self.sizes[i]
        return None

    def _place(self, msg: Message) -> bool:
        model = to_model(msg, self.viewer)
        if model is None:
            return False
        size = tokens_of(model)
        self.tokens += size
        result = msg.result if msg.author == self.viewer and msg.kind == "tool_result" else None
        slot = self._open.pop(result.call_id, None) if result else None
        at = len(self.view) if slot is None else slot[0]
        self.view.insert(at, model)
        self.sizes.insert(at, size)
        self.ids.insert(at, msg.id)
        if at < len(self.view) - 1:
            for other in {id(s): s for s in self._open.values()}.values():
                if other is not slot and other[0] >= at:
                    other[0] += 1
            self._replied += at < self._replied
            self._settled += at < self._settled
        if slot is not None:
            slot[0] += 1
        if msg.author == self.viewer and msg.kind == "tool_call":
            slot = [at + 1]
            for call in msg.calls:
                self._open[call.id] = slot
        elif msg.author == self.viewer and msg.kind == "text":
            self._replied = at + 1
        elif msg.kind == "task" and msg.author != self.viewer:
            self._settle()
        return True

    def _settle(self) -> None:
        """A new task starts: the results of the work finished before it are shown cleared from now on.
        Each view entry is looked at once over the partition's life, whatever the number of tasks."""
        for i in range(self._settled, self._replied):
            m = self.view[i]
            if clearable(m, self.sizes[i]):
                self.view[i], size = cleared(m)
                self.tokens -= self.sizes[i] - size
                self.sizes[i] = size
        self._settled = max(self._settled, self._replied)

    def _rebuild(self) -> None:
        """Replay with each summary standing where the first message it replaces stood."""
        placed = set()
        self.view, self.sizes, self.ids, self.tokens, self._open = [], [], [], 0, {}
        self._replied = self._settled = 0
        for m in self.messages:
            if m.replaces and m.id in placed:
                continue
            if m.id in self._summary_of:
                top = self._summary_of[m.id]
                while top.id in self._summary_of:  # a summary that a later summary replaced
                    top = self._summary_of[top.id]
                if top.id not in placed:
                    placed.add(top.id)
                    self._place(top)
                continue
            placed.add(m.id)
            self._place(m)

    def open_calls(self) -> set[str]:
        return set(self._open)

    def mark_read(self) -> None:
        self.unread = 0
        self.ending = False
        self.read_seq = self.messages[-1].seq if self.messages else 0  # the bus delivers in seq order
