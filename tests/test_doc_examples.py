"""Every code block of README.md and docs/*.md marked ``runnable`` runs, against a real ``ventana serve``.

The marker is a word in the fence's info string, after the language (renderers use only the
first word, so readers never see it)::

    ```python runnable        run by this Python
    ```bash runnable          run by ``bash -e``
    ```yaml runnable          a Ventana config: loaded by the loader ``ventana serve --config`` uses

A runnable block whose first line is a comment naming a path under ``~`` (``# ~/.codex/config.toml``)
is a file a reader creates: it is written there, for the blocks after it.

A block in a language that could run (python, bash, sh, yaml, toml) and is not marked carries
the reason on the line before it, as ``<!-- not runnable: why -->`` (it starts a server, needs
a real provider key, is another program's config...); a block with neither fails here, so a
new example is either run or explicitly excused.

The blocks of one document run in order in one sandbox: a fresh ``HOME`` and working directory
(the working directory links the repository's top-level folders, so ``examples/...`` resolve
and nothing is written into the checkout), no provider key in the environment, and one
gateway started from the bundled ``config/ventana.yaml``, as a newcomer's ``ventana serve``
is, so the simulator answers. The docs say ``http://127.0.0.1:8000`` (the port ``serve``
listens on); that text is rewritten to the test gateway's address, and ``VENTANA_URL`` (read
by ``examples/tool_agent.py``) points at it too. Claude Code and Codex CLI blocks need their
binaries, which ``tests/run.sh`` installs from npm: without them those blocks are reported as
not run (the rest still run), which is the only skip here. A shell block whose commands (comments
aside) already ran for another document in the same test process is not run twice.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.procs import REPO_ROOT, GatewayHandle, _env, run_gateway

DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
DOC_PORT_URL = "http://127.0.0.1:8000"
#: Languages a reader could run or load; their blocks are run or carry a reason.
CHECKED_LANGUAGES = {"python", "bash", "sh", "yaml", "toml"}
#: Client programs installed by tests/run.sh (npm); the only reason a block may go unrun.
NPM_CLIENTS = ("claude", "codex")
FENCE = re.compile(r"^```(?P<info>[^\n]*)\n(?P<body>.*?)^```[ \t]*$", re.S | re.M)
EXCUSE = re.compile(r"<!--\s*not runnable:\s*\S.*?-->\s*$", re.S)
FILE_LINE = re.compile(r"^#\s*(~/\S+)\s*$")
BLOCK_TIMEOUT_S = 300


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int
    language: str
    runnable: bool
    excused: bool
    body: str

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(REPO_ROOT)}:{self.line}"


def blocks(doc: Path) -> list[Block]:
    text = doc.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        words = match["info"].split()
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        found.append(
            Block(
                doc=doc,
                line=text.count("\n", 0, match.start()) + 1,
                language=words[0] if words else "",
                runnable="runnable" in words[1:],
                excused=bool(EXCUSE.search(before)),
                body=match["body"],
            )
        )
    return found


def test_every_block_that_could_run_is_marked_or_excused() -> None:
    loose = [
        b.where
        for doc in DOCS
        for b in blocks(doc)
        if b.language in CHECKED_LANGUAGES and not b.runnable and not b.excused
    ]
    assert loose == [], "mark these `runnable`, or put `<!-- not runnable: why -->` on the line before"


def test_the_docs_use_the_port_serve_listens_on() -> None:
    from gateway.cli import serve

    port = next(p.default for p in serve.params if p.name == "port")
    assert DOC_PORT_URL.endswith(f":{port}")
    other = [
        f"{doc.relative_to(REPO_ROOT)}:{n}"
        for doc in DOCS
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r":8080\b|--port 8080\b", line) and "llama" not in line  # llama.cpp's own default port
    ]
    assert other == [], "the gateway listens on 8000"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayHandle]:
    config = yaml.safe_load((REPO_ROOT / "config" / "ventana.yaml").read_text())
    with run_gateway(tmp_path_factory.mktemp("doc-gateway"), config) as gw:
        yield gw


def _sandbox(tmp: Path) -> tuple[Path, Path]:
    home, work = tmp / "home", tmp / "work"
    home.mkdir()
    work.mkdir()
    for entry in REPO_ROOT.iterdir():
        if not entry.name.startswith("."):
            (work / entry.name).symlink_to(entry)
    return home, work


def _block_env(home: Path, gw: GatewayHandle) -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    return _env(
        {
            "HOME": str(home),
            "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")]),
            "VENTANA_URL": gw.base_url,
            # Offline machine: the npm clients must not wait on telemetry or updates.
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
        }
    )


def _missing_client(block: Block) -> str | None:
    for name in NPM_CLIENTS:
        if re.search(rf"(^|[;&|]\s*|\s){name}\s", block.body, re.M) and shutil.which(name) is None:
            return name
    return None


def _run(block: Block, body: str, home: Path, work: Path, env: dict[str, str]) -> None:
    first = body.splitlines()[0] if body.strip() else ""
    target = FILE_LINE.match(first)
    if target:
        path = home / target[1].removeprefix("~/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
        return
    if block.language == "yaml":
        from gateway.config import load_settings

        config = work / f"block-{block.line}.yaml"
        config.write_text(body, encoding="utf-8")
        load_settings(config)
        return
    if block.language == "python":
        script = work / f"block-{block.line}.py"
        script.write_text(body, encoding="utf-8")
        cmd = [sys.executable, str(script)]
    elif block.language in ("bash", "sh"):
        cmd = ["bash", "-e", "-o", "pipefail", "-c", body]
    else:
        raise AssertionError(f"{block.where}: no runner for a `{block.language} runnable` block")
    done = subprocess.run(
        cmd, cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S
    )
    assert done.returncode == 0, f"{block.where} exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


RUNNABLE_DOCS = [doc for doc in DOCS if any(b.runnable for b in blocks(doc))]
#: Commands already run in this process, by their text without comments: the README and a doc
#: showing the same ``claude -p`` or ``codex exec`` line would run the same program twice.
_RAN: dict[tuple[str, tuple[str, ...]], str] = {}


def _command_key(block: Block) -> tuple[str, tuple[str, ...]]:
    lines = (re.sub(r"\s+#.*$", "", line).strip() for line in block.body.splitlines())
    return block.language, tuple(line for line in lines if line and not line.startswith("#"))


@pytest.mark.parametrize("doc", RUNNABLE_DOCS, ids=[str(d.relative_to(REPO_ROOT)) for d in RUNNABLE_DOCS])
def test_runnable_blocks_run(doc: Path, gateway: GatewayHandle, tmp_path: Path) -> None:
    home, work = _sandbox(tmp_path)
    env = _block_env(home, gateway)
    not_run = []
    for block in blocks(doc):
        if not block.runnable:
            continue
        missing = _missing_client(block)
        if missing:
            not_run.append(f"{block.where} ({missing} is not installed)")
            continue
        key = _command_key(block)
        if block.language in ("bash", "sh") and key in _RAN:
            continue  # the same commands ran (and passed) for _RAN[key]
        _run(block, block.body.replace(DOC_PORT_URL, gateway.url), home, work, env)
        _RAN[key] = block.where
    if not_run:
        pytest.skip("the other blocks ran; not run: " + ", ".join(not_run))


def test_the_readmes_banner_is_the_one_serve_prints(gateway: GatewayHandle) -> None:
    """The README shows ``ventana serve``'s banner for the bundled config with no key: it must be that banner."""
    shown = next(b for b in blocks(REPO_ROOT / "README.md") if b.body.lstrip().startswith("Ventana gateway on"))
    printed = gateway.log().splitlines()
    for line in shown.body.replace(DOC_PORT_URL, gateway.url).splitlines():
        assert line in printed, f"README.md:{shown.line}: {line!r} is not in the banner:\n{gateway.log()}"


def test_the_bundled_configs_worked_examples_load(tmp_path: Path) -> None:
    """The commented ``models:`` examples of config/ventana.yaml are valid once uncommented."""
    from gateway.config import load_settings

    lines = (REPO_ROOT / "config" / "ventana.yaml").read_text(encoding="utf-8").splitlines()
    examples: list[list[str]] = []
    for line in lines:
        if line.startswith("  # - name:"):
            examples.append([line])
        elif examples and line.startswith("  #   ") and examples[-1][-1].startswith("  #"):
            examples[-1].append(line)
        elif examples and examples[-1][-1].startswith("  #"):
            examples[-1].append("")  # the entry ended: a later commented line is not part of it
    examples = [[line.replace("  # ", "  ", 1) for line in e if line] for e in examples]
    assert len(examples) >= 5, "OpenAI, Anthropic, Gemini, a local server, an aggregator"
    config = tmp_path / "examples.yaml"
    config.write_text("models:\n" + "\n".join(line for e in examples for line in e) + "\n", encoding="utf-8")
    settings = load_settings(config)
    providers = {m.provider for m in settings.models}
    assert {"openai", "anthropic", "gemini"} <= providers
    assert any(m.api_base and "openrouter" in m.api_base for m in settings.models)
    assert any(m.api_base and m.api_base.startswith("http://127.0.0.1") and not m.api_key_env for m in settings.models)


def _app_paths() -> set[str]:
    """Every path the gateway app serves, routers included (FastAPI wraps an included router lazily)."""
    from gateway.api.app import create_app
    from gateway.config import load_settings

    paths: set[str] = set()
    pending = list(create_app(load_settings()).routes)
    while pending:
        route = pending.pop()
        inner = getattr(route, "original_router", None)
        if inner is not None:
            pending.extend(inner.routes)
        elif isinstance(getattr(route, "path", None), str):
            paths.add(route.path)
    return paths


def test_the_readme_lists_every_route() -> None:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Routes") :]
    section = section[: section.index("\n## ")]
    missing = []
    for path in sorted(_app_paths()):
        shown = re.sub(r"\{[^}]+\}", "{id}", path).rstrip("/") or "/"
        # The routes OpenAI clients also call without /v1 are listed once, "(also without /v1)".
        if f"`{shown}" not in section and f" {shown}`" not in section and f"/v1{shown}" not in section:
            missing.append(path)
    assert missing == [], "README.md's Routes table must list these"
