"""The crash test (S1, S2, S3, E3): SIGKILL `orchestrator run` at 50 random moments on one database.

A long scenario (a commander with ~60 scripted responses, most of them read_file calls, some in
concurrent groups of three, plus user turns and one interjection) is run with --json on the same
--db again and again, and killed at a random moment each time: during start-up, while the model is
"thinking", mid-stream and while tools run. After every kill the dead run's room is loaded through
`orchestrator show --json` (which heals it), and checked:

- `show` exits 0; `seq` strictly increases; message ids are unique;
- pairing holds: every call has exactly one result, by its author, after it, in declared order, and
  healing only had to answer calls of the room's last tool round;
- every user line is stored once, in the scenario's order (a prefix of the scenario's lines);
- nothing acknowledged is lost: every `message` event the killed process printed is still there,
  unchanged, and at most one message was committed without being printed (the one in flight).

Every 10 kills (with no run alive) `orchestrator rooms --json` lists the rooms, so a room created by
a run killed before it printed anything is checked too. At the end every room is loaded once more
in-process and must equal what `show` printed the first time (healing is idempotent, and later runs
on the same file never touched earlier rooms).
"""
from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import trio
import yaml

from orchestrator.core.events import EVENT_ENCODER, message_event
from orchestrator.core.types import Message, TextBlock, ToolCallBlock, ToolResultBlock
from orchestrator.store.heal import INTERRUPTED, pairing_problems

KILLS = 50
SEED = 20251129
TURNS, STEPS, DELAY = 4, 13, 0.01
PY = [sys.executable, "-m", "orchestrator"]


# --- the scenario ------------------------------------------------------------------------------

def user_lines() -> list[str]:
    lines = []
    for t in range(TURNS):
        lines.append(f"Turn {t}: please study the data set, part {t}.")
        if t == 1:
            lines.append("A side remark while you work: keep it short.")
    return lines


def write_scenario(root: Path) -> Path:
    """~60 responses: per user turn 13 read_file rounds (every 4th a group of three) and an answer."""
    ws = root / "ws"
    ws.mkdir()
    # big enough that a read takes a few ms, so kills land inside tool rounds too
    (ws / "big.txt").write_text("".join(f"line {i:08d} of the data set\n" for i in range(130_000)))
    responses, turns = [], []
    lines = iter(user_lines())
    for t in range(TURNS):
        turns.append({"user": next(lines)})
        if t == 1:  # an interjection while the commander is in its tool loop (G10)
            turns.append({"user": next(lines), "after": 0.08})
        for s in range(STEPS):
            n = 3 if s % 4 == 0 else 1
            calls = [{"read_file": {"path": "big.txt", "offset": 1000 * (t * 100 + s * 5 + k), "limit": 80}}
                     for k in range(n)]
            item: dict = {"say": f"Turn {t}, step {s}: reading part {s} of the data now.", "delay": DELAY}
            if n > 1:
                item["calls"] = calls
            else:
                item["call"] = calls[0]
            responses.append(item)
        responses.append({"say": f"Turn {t} is finished: the data looks consistent to me.", "delay": DELAY})
    scn = {"name": "crash-long", "description": "a long run, killed at random moments",
           "team": {"commander": {"tools": ["read_file"]}}, "workspace": "ws",
           "models": {"commander": responses}, "turns": turns}
    path = root / "crash.yaml"
    path.write_text(yaml.safe_dump(scn, sort_keys=False))
    return path


# --- the CLI ---------------------------------------------------------------------------------

def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*PY, *args], capture_output=True, timeout=timeout)


def show(db: Path | str, room: str) -> list[dict]:
    r = cli("show", room, "--db", str(db), "--json")
    assert r.returncode == 0, f"show {room} exited {r.returncode}: {r.stderr.decode()[-2000:]}"
    events = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    assert all(e["type"] == "message" and e["room"] == room for e in events)
    return events


def list_rooms(db: Path | str) -> dict[str, dict]:
    r = cli("rooms", "--db", str(db), "--json")
    assert r.returncode == 0, r.stderr.decode()
    return {row["id"]: row for row in map(json.loads, r.stdout.splitlines())}


def _display(events: list[dict]) -> list[dict]:
    """Messages as a reader compares them: a synthesized result's id and time are made anew by each healing."""
    return [{k: v for k, v in e.items() if k not in ("id", "ts")} if e.get("text") == INTERRUPTED else e
            for e in events]


def printed_events(path: Path) -> list[dict]:
    """The JSON events a (possibly killed) run printed; a torn last line is ignored."""
    data = path.read_bytes()
    lines = data.split(b"\n")
    if not data.endswith(b"\n"):
        lines = lines[:-1]
    return [json.loads(line) for line in lines if line.strip()]


# --- the checks ---------------------------------------------------------------------------------

def as_messages(events: list[dict]) -> list[Message]:
    """`show --json` events back into Messages, enough for heal.pairing_problems."""
    out = []
    for e in events:
        if e["kind"] == "tool_call":
            blocks = [ToolCallBlock(c["call_id"], c["name"], c["input"]) for c in e["calls"]]
        elif e["kind"] == "tool_result":
            blocks = [ToolResultBlock(e["call_id"], e["name"], e["text"], e["is_error"])]
        else:
            blocks = [TextBlock(e["text"])]
        out.append(Message(id=e["id"], room=e["room"], seq=e["seq"], ts=e["ts"], author=e["author"],
                           kind=e["kind"], blocks=blocks, visible_to=e["visible_to"]))
    return out


def check_room(stored: list[dict], printed: list[dict] | None, lines: list[str]) -> dict:
    """Every invariant of a healed room; `printed` is what its (killed) run acknowledged, if known."""
    room = stored[0]["room"] if stored else "?"
    seqs = [m["seq"] for m in stored]
    assert all(a < b for a, b in zip(seqs, seqs[1:])), f"{room}: seq not strictly increasing: {seqs}"
    assert len({m["id"] for m in stored}) == len(stored), f"{room}: a message id repeats"

    # pairing, checked literally and with the project's own checker
    assert pairing_problems(as_messages(stored)) == [], f"{room}: {pairing_problems(as_messages(stored))}"
    call_msgs = [i for i, m in enumerate(stored) if m["kind"] == "tool_call"]
    answered: set[str] = set()
    for i in call_msgs:
        m = stored[i]
        ids = [c["call_id"] for c in m["calls"]]
        results = [r for r in stored[i + 1:] if r["kind"] == "tool_result" and r["author"] == m["author"]
                   and r["call_id"] in ids]
        assert [r["call_id"] for r in results] == ids, f"{room}: results {results} for calls {ids}"
        assert [r["name"] for r in results] == [c["name"] for c in m["calls"]]
        answered.update(ids)
    results_all = [m for m in stored if m["kind"] == "tool_result"]
    assert len(results_all) == len(answered), f"{room}: a result answers no call (or a call is answered twice)"
    interrupted = [m for m in results_all if m["text"] == INTERRUPTED]
    assert all(m["is_error"] for m in interrupted)
    if interrupted:  # only the last tool round can have been open when the process died
        last_ids = {c["call_id"] for c in stored[call_msgs[-1]]["calls"]}
        assert {m["call_id"] for m in interrupted} <= last_ids, f"{room}: healing answered an old round"

    # S3: each user line once, in the scenario's order
    users = [m["text"] for m in stored if m["kind"] == "user"]
    assert users == lines[:len(users)], f"{room}: user lines {users}"

    unprinted = []
    if printed is not None:
        by_id = {m["id"]: m for m in stored}
        acked = [e for e in printed if e["type"] == "message"]
        for e in acked:
            assert e["id"] in by_id, f"{room}: acknowledged message lost: {e}"
            s = by_id[e["id"]]
            for key in ("seq", "author", "kind", "text", "visible_to", "calls", "call_id", "is_error"):
                assert s.get(key) == e.get(key), f"{room}: {key} changed for {e['id']}: {e} -> {s}"
        printed_ids = {e["id"] for e in acked}
        top = max((e["seq"] for e in acked), default=0)
        unprinted = [m for m in stored if m["id"] not in printed_ids and m["text"] != INTERRUPTED]
        # committed but not printed: only the one message in flight when the process died
        assert all(m["seq"] > top for m in unprinted), f"{room}: an unprinted message before printed ones"
        assert len(unprinted) <= 1, f"{room}: {len(unprinted)} committed messages were never printed"
    return {"messages": len(stored), "interrupted": len(interrupted), "unprinted": len(unprinted)}


def phase(printed: list[dict]) -> str:
    """Where the run was when it died, judged by the last events it printed."""
    if not printed:
        return "startup"
    if printed[-1]["type"] == "check":
        return "finished"
    msgs = [e for e in printed if e["type"] == "message"]
    calls = [m for m in msgs if m["kind"] == "tool_call"]
    if calls:
        ids = {c["call_id"] for c in calls[-1]["calls"]}
        done = {m["call_id"] for m in msgs if m["kind"] == "tool_result" and m["call_id"] in ids}
        if done != ids:
            return "tools"
    if printed[-1]["type"] == "text_delta":
        return "streaming"
    if not msgs:
        return "opening"
    return "model"


async def _load_all(backend, rooms: list[str]) -> dict[str, list[dict]]:
    store = await backend.open()
    try:
        out = {}
        for room in rooms:
            out[room] = [json.loads(EVENT_ENCODER.encode(message_event(m))) for m in await store.load(room)]
        return out
    finally:
        await store.close()


# --- the test ---------------------------------------------------------------------------------

def test_kill_at_random_moments_loses_and_breaks_nothing(tmp_path, backend):
    began = time.monotonic()
    rng = random.Random(SEED)
    scn = write_scenario(tmp_path)
    db = backend.target
    lines = user_lines()
    first_show: dict[str, list[dict]] = {}

    # a full run first: it must pass, and it tells how long a run takes
    out = tmp_path / "full.jsonl"
    t0 = time.monotonic()
    with open(out, "wb") as f:
        rc = subprocess.run([*PY, "run", str(scn), "--db", str(db), "--json"], stdout=f,
                            stderr=subprocess.PIPE, timeout=60).returncode
    typical = time.monotonic() - t0
    printed = printed_events(out)
    assert rc == 0, f"the uninterrupted run failed ({rc}): {printed[-1:]}"
    assert printed[-1]["type"] == "check" and printed[-1]["ok"], printed[-1]
    full_room = printed[-1]["room"]
    first_show[full_room] = show(db, full_room)
    stats = check_room(first_show[full_room], printed, lines)
    assert stats["interrupted"] == 0 and stats["unprinted"] == 0
    assert len([m for m in first_show[full_room] if m["kind"] == "user"]) == len(lines)

    # Kill moments by progress, not by the clock: a run on a busy machine spends longer starting up, and
    # kills timed from a quiet run would pile up there. A few kills come before any output (start-up);
    # the rest wait until the run has printed a stratified random share of a full run's events, then
    # a random fraction of a millisecond or three more, so every part of a run gets its share.
    total = len(printed)
    early = max(2, KILLS // 10)
    slots = list(range(KILLS - early))
    rng.shuffle(slots)
    moments: list[tuple[float, int]] = [(rng.uniform(0.0, 0.2), 0) for _ in range(early)]
    moments += [(rng.uniform(0.0, 0.003), 1 + int((total - 1) * (k + rng.random()) / len(slots))) for k in slots]
    rng.shuffle(moments)
    phases: Counter[str] = Counter()
    interrupted = 0
    pending: list[Future] = []
    pool = ThreadPoolExecutor(max_workers=1)

    def verify(room: str, printed: list[dict]) -> dict:
        first_show[room] = show(db, room)
        return check_room(first_show[room], printed, lines)

    try:
        for n, (delay, after_events) in enumerate(moments, 1):
            out = tmp_path / f"kill{n}.jsonl"
            with open(out, "wb") as f:
                proc = subprocess.Popen([*PY, "run", str(scn), "--db", str(db), "--json"], stdout=f,
                                        stderr=subprocess.DEVNULL)
            while after_events and proc.poll() is None and out.read_bytes().count(b"\n") < after_events:
                time.sleep(0.0005)
            time.sleep(delay)
            proc.kill()
            rc = proc.wait(timeout=30)
            assert rc in (0, -9), f"run {n} ended with exit code {rc} before the kill"
            printed = printed_events(out)
            phases[phase(printed)] += 1
            rooms = {e["room"] for e in printed if e.get("room")}
            assert len(rooms) <= 1
            if rooms:  # checked while the next run goes on (both write the same file)
                pending.append(pool.submit(verify, rooms.pop(), printed))
            if n % 10 == 0:  # no run alive: every listed room belongs to a dead run
                for fut in pending:
                    interrupted += fut.result()["interrupted"]
                pending.clear()
                for room, row in list_rooms(db).items():
                    if room not in first_show:  # created, then killed before it printed anything
                        first_show[room] = show(db, room)
                        check_room(first_show[room], None, lines)
                    # `rooms` counts stored messages; `show` only reads, and adds the results healing
                    # synthesizes for display (nothing has healed these rooms in the file yet)
                    stored = [m for m in first_show[room] if m.get("text") != INTERRUPTED]
                    assert row["messages"] == len(stored), f"{room}: rooms and show disagree"
        for fut in pending:
            interrupted += fut.result()["interrupted"]
    finally:
        pool.shutdown(wait=True)

    # every room, once more and in-process, healed into the file this time: what the read-only `show`
    # displayed, except the new ids and times of the results synthesized (no later run touched another room)
    listed = list_rooms(db)
    assert set(listed) == set(first_show)
    again = trio.run(_load_all, backend, sorted(listed))
    for room, events in again.items():
        assert _display(events) == _display(first_show[room]), f"{room} changed after its first show"
    assert trio.run(_load_all, backend, sorted(listed)) == again  # healing in the file is idempotent

    took = time.monotonic() - began
    print(f"\ncrash test ({backend.kind}): {KILLS} kills, typical run {typical:.2f}s, {len(listed)} rooms, "
          f"{interrupted} interrupted results synthesized, phases {dict(phases)}, {took:.1f}s in all")
    # the kills landed everywhere: before the room existed, while the model ran, during tool rounds
    assert phases["startup"] + phases["opening"] >= 2, phases
    assert phases["model"] + phases["streaming"] >= 5, phases
    assert phases["tools"] >= 3, phases
    assert interrupted >= 3
