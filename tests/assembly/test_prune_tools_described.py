"""prune_tools: a tool the newest user message names or describes is offered on that request (issue 34).

Before: with ``find_tools`` served, a sticky set only grew by what the history called, so "please open a
tracker issue describing the flaky test" went out with ``find_tools`` but not ``create_issue``.
"""

from __future__ import annotations

from gateway.assembly.policy import Policy
from gateway.assembly.prune_tools import ToolPolicy, prune_tools
from gateway.assembly.tool_required import described_names
from gateway.assembly.tool_scoring import tool_name
from tests.assembly.tool_fixtures import make_ctx, tool, user

assert Policy  # imported first: policy.py gathers the pass policies
POLICY = ToolPolicy(min_tool_tokens=0, mode="prune")
SPECS = [
    ("read_file", "Read a file of the repository, optionally a line range"),
    ("grep", "Search file contents with a regular expression"),
    ("run_tests", "Run the test suite or a subset of it with pytest"),
    ("git_diff", "Show the diff of the working tree or between commits"),
    ("lint", "Run the linter on files and report findings"),
    ("open_issue", "Read an issue of the project tracker"),
    ("create_issue", "Open an issue in the project tracker."),
    ("web_search", "Search the web for documentation or error messages"),
    ("fetch_url", "Fetch the text of a web page"),
    ("rename_symbol", "Rename a symbol across the repository"),
    ("coverage_report", "Report test coverage per file"),
    ("ask_user", "Ask the developer a question and wait for the answer"),
]
TOOLS = [tool(name, description) for name, description in SPECS]


def _names(ctx) -> list[str]:
    return [tool_name(t) for t in ctx.tools]


def test_the_described_tool_is_offered_on_the_request_that_asks() -> None:
    first = make_ctx([user("The lexer crashes on empty input in parser/lexer.py; read it and run the tests.")], TOOLS)
    out, _ = prune_tools(first, POLICY)
    assert "create_issue" not in _names(out) and "find_tools" in _names(out)
    later = make_ctx(
        [
            *first.messages,
            {"role": "assistant", "content": "Fixed."},
            user("please open a tracker issue describing the flaky test"),
        ],
        TOOLS,
    ).replace(session=out.session)
    again, _ = prune_tools(later, POLICY)
    assert "create_issue" in _names(again), "asked for by description: offered on that request"


def test_names_and_descriptions_not_loose_mentions() -> None:
    assert described_names([user("run git_diff on the branch")], TOOLS) == {"git_diff"}
    assert described_names([user("show me the coverage report")], TOOLS) == {"coverage_report"}
    assert described_names([user("the issue is in the parser")], TOOLS) == set(), "one common word is not a request"
    tool_turn = [user("open a tracker issue"), {"role": "tool", "tool_call_id": "c", "content": "ok"}]
    assert described_names(tool_turn, TOOLS) == set(), "only a message the user just wrote"


def test_a_name_inside_another_word_is_not_a_request() -> None:
    """BFCL's file-system tools are ``tail``, ``ls``, ``cat``, ``rm``: "a detailed search", "its details",
    "locate the invoice" and "confirm" named them before (a substring match), and each grew the set."""
    shell = [tool(name, f"The {name} command of the file system") for name in ("tail", "ls", "cat", "rm", "grep")]
    said = user("Perform a detailed search, locate the invoice and confirm its details.")
    assert described_names([said], shell) == set()
    assert described_names([user("Use grep, then show the tail of log.txt")], shell) == {"grep", "tail"}
