"""The file tools one by one, and read-before-write between agents sharing one ToolSession."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import trio

from orchestrator.tools.base import ToolContext, ToolError, schema_of
from orchestrator.tools.builtin import BUILTIN
from orchestrator.tools.files import FILE_TOOLS, READ_CAP
from orchestrator.tools.search import GREP_FILE_BYTES, LINE_CAP, SEARCH_TOOLS, glob_regex
from orchestrator.tools.reads import ReadLedger
from orchestrator.tools.session import ToolSession


@pytest.fixture(autouse=True)
def hermetic_env(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("ORCHESTRATOR_DB", raising=False)


@pytest.fixture
def ws(tmp_path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def session(ws) -> ToolSession:
    return ToolSession(ws)


async def call(session: ToolSession, name: str, agent: str = "a", **args) -> tuple[str, bool]:
    tool = BUILTIN[name]
    try:
        return await tool.run(tool.parse(args), ToolContext(agent, "call", session)), False
    except ToolError as exc:
        return str(exc), True


async def ok(session: ToolSession, name: str, agent: str = "a", **args) -> str:
    text, is_error = await call(session, name, agent, **args)
    assert not is_error, text
    return text


async def err(session: ToolSession, name: str, agent: str = "a", **args) -> str:
    text, is_error = await call(session, name, agent, **args)
    assert is_error, text
    return text


def test_the_contract_names_required_arguments_and_read_only_flags():
    required = {t.name: schema_of(t.args)["required"] for t in (*FILE_TOOLS, *SEARCH_TOOLS)}
    assert required == {"read_file": ["path"], "write_file": ["path", "content"], "edit_file": ["path", "old", "new"],
                        "stat_file": ["path"], "search_files": ["pattern"], "grep_files": ["pattern"]}
    assert {t.name: t.read_only for t in (*FILE_TOOLS, *SEARCH_TOOLS)} == {
        "read_file": True, "stat_file": True, "search_files": True, "grep_files": True,
        "write_file": False, "edit_file": False}
    assert {t.name for t in (*FILE_TOOLS, *SEARCH_TOOLS) if t.concurrent} == {"read_file", "stat_file", "search_files", "grep_files"}
    assert BUILTIN.items() >= {t.name: t for t in (*FILE_TOOLS, *SEARCH_TOOLS)}.items()  # shell tools join them there


# --- read_file ---

async def test_read_character_ranges_with_a_note_to_read_on(ws, session):
    (ws / "a.txt").write_text("0123456789")
    assert await ok(session, "read_file", path="a.txt") == "0123456789"
    assert await ok(session, "read_file", path="a.txt", offset=2, limit=3) == (
        "234\n[showing characters 2-5 of 10; call read_file with offset=5 to read on]")
    assert await ok(session, "read_file", path="a.txt", offset=5) == "56789"
    assert "past the end" in await ok(session, "read_file", path="a.txt", offset=50)


async def test_read_caps_large_files_and_says_how_to_go_on(ws, session):
    (ws / "big.txt").write_text("x" * (READ_CAP + 10))
    text = await ok(session, "read_file", path="big.txt")
    assert text.startswith("x" * READ_CAP) and text.endswith(
        f"[showing characters 0-{READ_CAP} of {READ_CAP + 10}; call read_file with offset={READ_CAP} to read on]")
    assert await ok(session, "read_file", path="big.txt", limit=10 * READ_CAP, offset=READ_CAP) == "x" * 10


async def test_read_line_ranges_and_line_numbers(ws, session):
    (ws / "l.txt").write_text("one\ntwo\nthree\nfour\n")
    assert await ok(session, "read_file", path="l.txt", start_line=2, end_line=3) == "two\nthree\n[lines 2-3 of 4]"
    assert await ok(session, "read_file", path="l.txt", start_line=3) == "three\nfour\n[lines 3-4 of 4]"
    assert await ok(session, "read_file", path="l.txt", line_numbers=True) == (
        "     1\tone\n     2\ttwo\n     3\tthree\n     4\tfour\n")
    first = await ok(session, "read_file", path="l.txt", end_line=1, line_numbers=True)
    assert first == "     1\tone\n[lines 1-1 of 4]"
    # a character range keeps counting lines from where it starts
    middle = await ok(session, "read_file", path="l.txt", offset=8, limit=6, line_numbers=True)
    assert middle.startswith("     3\tthree")
    assert "past the end" in await ok(session, "read_file", path="l.txt", start_line=9)
    assert "not both" in await err(session, "read_file", path="l.txt", start_line=1, offset=0)
    assert "before start_line" in await err(session, "read_file", path="l.txt", start_line=3, end_line=2)
    assert "invalid arguments" in await err(session, "read_file", path="l.txt", lines="1-2")


async def test_read_line_ranges_are_capped_too(ws, session):
    line = "y" * 999 + "\n"
    (ws / "many.txt").write_text(line * 200)
    text = await ok(session, "read_file", path="many.txt", start_line=1)
    shown = READ_CAP // len(line)
    assert text.count("\n") == shown and text.endswith(
        f"[showing lines 1-{shown} of 200; call read_file with start_line={shown + 1} to read on]")
    (ws / "wide.txt").write_text("a\n" + "z" * (READ_CAP + 5) + "\n")
    text = await ok(session, "read_file", path="wide.txt", start_line=2)
    assert text.startswith("z" * READ_CAP) and f"call read_file with offset={2 + READ_CAP}" in text


async def test_read_refuses_folders_binaries_and_missing_files(ws, session):
    (ws / "d").mkdir()
    (ws / "b.bin").write_bytes(b"\x89PNG\0\0\0binary")
    (ws / "empty.txt").write_text("")
    assert "is a folder" in await err(session, "read_file", path="d")
    assert "binary" in await err(session, "read_file", path="b.bin")
    assert "no such file" in await err(session, "read_file", path="nope.txt")
    assert await ok(session, "read_file", path="empty.txt") == "[empty.txt is empty]"


def tiny_pdf(text: str) -> bytes:
    content = b"BT /F1 24 Tf 72 700 Td (" + text.encode() + b") Tj ET"
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
               b"/Resources << /Font << /F1 5 0 R >> >> >>",
               b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content),
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out, offsets = b"%PDF-1.4\n", []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (n, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    return out + b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)


async def test_read_pdf_and_docx_text(ws, session):
    pytest.importorskip("pypdf")
    docx = pytest.importorskip("docx")
    (ws / "doc.pdf").write_bytes(tiny_pdf("Hello from a PDF"))
    assert "Hello from a PDF" in await ok(session, "read_file", path="doc.pdf")
    document = docx.Document()
    document.add_paragraph("Hello from Word")
    document.save(ws / "doc.docx")
    assert "Hello from Word" in await ok(session, "read_file", path="doc.docx")
    (ws / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    assert "could not extract text" in await err(session, "read_file", path="broken.pdf")


async def test_read_documents_without_the_extra_says_what_to_install(ws, session, monkeypatch):
    monkeypatch.setitem(sys.modules, "pypdf", None)  # makes `import pypdf` fail as if not installed
    monkeypatch.setitem(sys.modules, "docx", None)
    (ws / "doc.pdf").write_bytes(tiny_pdf("x"))
    (ws / "doc.docx").write_bytes(b"PK\x03\x04")
    for name in ("doc.pdf", "doc.docx"):
        assert "needs the `docs` extra: `pip install -e '.[docs]'`" in await err(session, "read_file", path=name)


# --- write_file and edit_file: read before write (E14) ---

async def test_write_creates_new_files_and_folders_without_a_read(ws, session):
    assert await ok(session, "write_file", path="n/e/w.txt", content="fresh") == "created n/e/w.txt (5 characters)"
    assert (ws / "n" / "e" / "w.txt").read_text() == "fresh"
    # the writer's record is the new state: it may overwrite or edit again without re-reading
    assert (await ok(session, "write_file", path="n/e/w.txt", content="fresher")).startswith("overwrote")
    await ok(session, "edit_file", path="n/e/w.txt", old="fresher", new="freshest")
    assert (ws / "n" / "e" / "w.txt").read_text() == "freshest"
    assert "is a folder" in await err(session, "write_file", path="n/e", content="x")


async def test_overwrite_and_edit_need_a_read_of_the_current_version(ws, session):
    (ws / "f.txt").write_text("version one")
    for tool, args in (("write_file", {"content": "x"}), ("edit_file", {"old": "one", "new": "two"})):
        assert "read it first" in await err(session, tool, path="f.txt", **args)
    await ok(session, "read_file", path="f.txt")
    (ws / "f.txt").write_text("version one, changed by someone else")
    for tool, args in (("write_file", {"content": "x"}), ("edit_file", {"old": "one", "new": "two"})):
        text = await err(session, tool, path="f.txt", **args)
        assert "stale" in text and "changed since you read it" in text
    assert (ws / "f.txt").read_text() == "version one, changed by someone else"
    await ok(session, "read_file", path="f.txt", start_line=1, end_line=1)  # any read of it counts
    await ok(session, "edit_file", path="f.txt", old="someone else", new="me")
    assert (ws / "f.txt").read_text() == "version one, changed by me"


async def test_a_read_by_one_agent_does_not_let_another_write(ws, session):
    (ws / "f.txt").write_text("text")
    await ok(session, "read_file", "alice", path="f.txt")
    assert "read it first" in await err(session, "write_file", "bob", path="f.txt", content="bob's")
    await ok(session, "write_file", "alice", path="f.txt", content="alice's")


async def test_a_touch_without_a_change_is_not_stale(ws, session):
    (ws / "f.txt").write_text("same")
    await ok(session, "read_file", path="f.txt")
    os.utime(ws / "f.txt", ns=(1, 1))
    await ok(session, "edit_file", path="f.txt", old="same", new="new")


async def test_edit_reports_zero_or_several_matches(ws, session):
    (ws / "e.txt").write_text("alpha\nbeta\nalpha\ngamma\nalpha\n")
    await ok(session, "read_file", path="e.txt")
    text = await err(session, "edit_file", path="e.txt", old="delta", new="x")
    assert "`old` was not found" in text and "must match the file exactly" in text
    text = await err(session, "edit_file", path="e.txt", old="alpha", new="x")
    assert "matches 3 times (at lines 1, 3, 5)" in text and "exactly once" in text
    (ws / "o.txt").write_text("aaa")
    await ok(session, "read_file", path="o.txt")
    assert "matches 2 times" in await err(session, "edit_file", path="o.txt", old="aa", new="b")  # overlapping
    assert "empty" in await err(session, "edit_file", path="e.txt", old="", new="x")
    assert "the same" in await err(session, "edit_file", path="e.txt", old="beta", new="beta")
    assert await ok(session, "edit_file", path="e.txt", old="beta\n", new="BETA\nBETA2\n") == (
        "edited e.txt: replaced the one match; the new text is at lines 2-3")
    assert (ws / "e.txt").read_text() == "alpha\nBETA\nBETA2\nalpha\ngamma\nalpha\n"


async def test_edit_hints_at_crlf_and_refuses_non_text(ws, session):
    (ws / "w.txt").write_bytes(b"one\r\ntwo\r\n")
    await ok(session, "read_file", path="w.txt")
    assert "CRLF" in await err(session, "edit_file", path="w.txt", old="one\ntwo", new="x")
    await ok(session, "edit_file", path="w.txt", old="one\r\ntwo", new="1\r\n2")
    assert (ws / "w.txt").read_bytes() == b"1\r\n2\r\n"
    (ws / "latin.txt").write_bytes(b"caf\xe9")
    await ok(session, "read_file", path="latin.txt")
    assert "not UTF-8" in await err(session, "edit_file", path="latin.txt", old="caf", new="cafe")
    assert "no such file" in await err(session, "edit_file", path="new.txt", old="a", new="b")
    assert not (ws / "new.txt").exists()


async def test_two_workers_editing_from_the_same_read_one_lands_one_is_stale(ws):
    for round_ in range(10):
        session = ToolSession(ws)
        (ws / "shared.txt").write_text("alpha\nbeta\n")
        for agent in ("w1", "w2"):
            await ok(session, "read_file", agent, path="shared.txt")
        results = {}

        async def edit(agent, old, new):
            results[agent] = await call(session, "edit_file", agent, path="shared.txt", old=old, new=new)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(edit, "w1", "alpha", "ALPHA")
            nursery.start_soon(edit, "w2", "beta", "BETA")
        landed = [a for a, (_, is_error) in results.items() if not is_error]
        stale = [a for a, (text, is_error) in results.items() if is_error and "stale" in text]
        assert len(landed) == 1 and len(stale) == 1, results
        content = (ws / "shared.txt").read_text()
        assert content in ("ALPHA\nbeta\n", "alpha\nBETA\n")
        # the loser re-reads and redoes its edit: nothing is lost
        loser = stale[0]
        await ok(session, "read_file", loser, path="shared.txt")
        old, new = ("alpha", "ALPHA") if loser == "w1" else ("beta", "BETA")
        await ok(session, "edit_file", loser, path="shared.txt", old=old, new=new)
        assert (ws / "shared.txt").read_text() == "ALPHA\nBETA\n"
        assert not session.reads._locks  # idle locks are dropped


async def test_many_concurrent_writers_never_tear_a_file(ws):
    session = ToolSession(ws)
    (ws / "log.txt").write_text("")
    agents = [f"w{i}" for i in range(8)]
    for agent in agents:
        await ok(session, "read_file", agent, path="log.txt")
    results = []

    async def write(agent):
        results.append(await call(session, "write_file", agent, path="log.txt", content=agent * 1000))

    async with trio.open_nursery() as nursery:
        for agent in agents:
            nursery.start_soon(write, agent)
    assert sum(not is_error for _, is_error in results) == 1
    content = (ws / "log.txt").read_text()
    assert content in {agent * 1000 for agent in agents}


async def test_ledger_locks_serialise_per_path():
    ledger, order = ReadLedger(), []

    async def hold(tag, path):
        async with ledger.writing(path):
            order.append(f"{tag} in")
            await trio.sleep(0.01)
            order.append(f"{tag} out")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(hold, "a", Path("/x"))
        nursery.start_soon(hold, "b", Path("/x"))
    assert order in (["a in", "a out", "b in", "b out"], ["b in", "b out", "a in", "a out"])


# --- stat_file ---

async def test_stat_files_and_folders(ws, session):
    (ws / "s.txt").write_text("12345")
    os.chmod(ws / "s.txt", 0o640)
    (ws / "d").mkdir()
    (ws / "d" / "x").write_text("")
    text = await ok(session, "stat_file", path="s.txt")
    assert "path: s.txt\ntype: file\nsize: 5 bytes\nmodified: " in text and "permissions: 0640" in text
    assert "hard links: 1" in text
    assert "type: folder (1 entry)" in await ok(session, "stat_file", path="d")
    assert "no such file" in await err(session, "stat_file", path="missing")
    os.link(ws / "s.txt", ws / "s2.txt")  # metadata of a hard-linked file may be looked at, not its content
    assert "hard links: 2" in await ok(session, "stat_file", path="s2.txt")


# --- search_files ---

@pytest.fixture
def tree(ws) -> Path:
    files = {
        ".gitignore": "*.log\nbuild/\n/top-only.txt\n!keep.log\n",
        "README.md": "# readme\n",
        "top-only.txt": "", "keep.log": "", "debug.log": "",
        "src/app.py": "import os\n\ndef main():\n    return os.getcwd()\n",
        "src/util.py": "def helper():\n    pass\n",
        "src/top-only.txt": "",
        "src/build/gen.py": "def generated(): pass\n",
        "src/web/index.ts": "export const x = 1\n", "src/web/view.tsx": "export const y = 2\n",
        "src/web/.gitignore": "*.tsx\n",
        "docs/guide.md": "def in docs\n",
        ".git/config": "def in git\n",
    }
    for rel, text in files.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    return ws


async def test_search_by_name_and_by_path_honoring_gitignore(tree, session):
    assert (await ok(session, "search_files", pattern="*.py")).splitlines() == ["src/app.py", "src/util.py"]
    assert (await ok(session, "search_files", pattern="*.log")).splitlines() == ["keep.log"]
    assert (await ok(session, "search_files", pattern="top-only.txt")).splitlines() == ["src/top-only.txt"]
    assert (await ok(session, "search_files", pattern="src/**/*.{ts,tsx}")).splitlines() == ["src/web/index.ts"]
    assert (await ok(session, "search_files", pattern="*.py", path="src")).splitlines() == ["src/app.py", "src/util.py"]
    assert (await ok(session, "search_files", pattern="web/*.ts", path="src")).splitlines() == ["src/web/index.ts"]
    everything = (await ok(session, "search_files", pattern="**/*", include_ignored=True)).splitlines()
    assert "src/build/gen.py" in everything and "debug.log" in everything and "src/web/view.tsx" in everything
    assert not [p for p in everything if p.startswith(".git/")]
    assert "no files match" in await ok(session, "search_files", pattern="*.rs")
    assert "is a file" in await err(session, "search_files", pattern="*", path="README.md")


async def test_search_caps_results_with_a_note(ws, session):
    for i in range(30):
        (ws / f"f{i:02}.txt").write_text("")
    text = await ok(session, "search_files", pattern="*.txt", max_results=5)
    assert text.splitlines()[:5] == [f"f{i:02}.txt" for i in range(5)]
    assert text.endswith("[showing the first 5 of 30 matches; narrow the pattern, pass `path`, "
                         "or raise max_results (at most 1000)]")


def test_glob_translation():
    assert glob_regex("*.py").match("a.py") and not glob_regex("*.py").match("a/b.py")
    assert glob_regex("**/*.py").match("a.py") and glob_regex("**/*.py").match("a/b/c.py")
    assert glob_regex("src/**").match("src/a/b") and not glob_regex("src/**").match("lib/a")
    assert glob_regex("f?.[ch]").match("f1.c") and not glob_regex("f?.[!ch]").match("f1.c")
    assert glob_regex("*.{md,txt}").match("a.txt") and not glob_regex("*.{md,txt}").match("a.rs")
    assert glob_regex("a+b(1).txt").match("a+b(1).txt")
    assert glob_regex("[[]x").match("[x") and glob_regex("f[a-c].py").match("fb.py")
    with pytest.raises(ToolError, match="invalid glob"):
        glob_regex("[z-a]")


# --- grep_files ---

async def test_grep_with_context_and_gitignore(tree, session):
    assert (await ok(session, "grep_files", pattern=r"^def ")).splitlines() == [
        "docs/guide.md:1:def in docs", "src/app.py:3:def main():", "src/util.py:1:def helper():"]
    assert await ok(session, "grep_files", pattern="getcwd", context=1) == (
        "src/app.py-3-def main():\nsrc/app.py:4:    return os.getcwd()")
    assert await ok(session, "grep_files", pattern="def|return", path="src/app.py", context=5) == (
        "src/app.py-1-import os\nsrc/app.py-2-\nsrc/app.py:3:def main():\nsrc/app.py:4:    return os.getcwd()")
    text = await ok(session, "grep_files", pattern="^def", context=1, glob="*.py")
    assert text == "src/app.py-2-\nsrc/app.py:3:def main():\nsrc/app.py-4-    return os.getcwd()\n--\n" \
                   "src/util.py:1:def helper():\nsrc/util.py-2-    pass"
    assert "src/build/gen.py:1:" in await ok(session, "grep_files", pattern="generated", include_ignored=True)
    assert "no matches" in await ok(session, "grep_files", pattern="generated")
    assert "in git" not in await ok(session, "grep_files", pattern="def", include_ignored=True)
    assert "README.md:1:# readme" == await ok(session, "grep_files", pattern="README", ignore_case=True)
    assert "invalid regular expression" in await err(session, "grep_files", pattern="(unclosed")


async def test_grep_caps_matches_output_and_line_width(ws, session):
    (ws / "many.txt").write_text("hit\n" * 50)
    text = await ok(session, "grep_files", pattern="hit", max_matches=3)
    assert text.splitlines()[:3] == ["many.txt:1:hit", "many.txt:2:hit", "many.txt:3:hit"]
    assert text.endswith("[stopped after 3 matches; narrow with `path`, `glob` or the pattern, "
                         "or raise max_matches (at most 1000)]")
    (ws / "wide.txt").write_text("hit" + "w" * (LINE_CAP * 2) + "\n")
    wide = await ok(session, "grep_files", pattern="hitw", path="wide.txt")
    assert wide.endswith(f"... [{LINE_CAP * 2 + 3} characters]") and len(wide) < LINE_CAP + 50
    (ws / "huge.txt").write_text(("hit " + "v" * 300 + "\n") * 400)
    text = await ok(session, "grep_files", pattern="hit", path="huge.txt", max_matches=1000)
    assert f"stopped at {READ_CAP} characters of output" in text and len(text) < READ_CAP + 1000


async def test_grep_skips_binary_large_and_hard_linked_files(ws, session):
    (ws / "a.txt").write_text("needle\n")
    (ws / "b.bin").write_bytes(b"needle\0\0")
    (ws / "big.txt").write_bytes(b"needle\n" + b"." * GREP_FILE_BYTES)
    (ws / "orig.txt").write_text("needle\n")
    os.link(ws / "orig.txt", ws / "linked.txt")
    text = await ok(session, "grep_files", pattern="needle")
    assert text == "a.txt:1:needle\n[skipped 4 files that are binary, larger than 4 MiB or hard-linked]"
