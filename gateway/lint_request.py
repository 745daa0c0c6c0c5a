"""``ventana lint``: run the assembly pipeline and its validation gate offline on one request body.

A team can check its own prompts in CI without a running gateway or provider: the
request body (the JSON an OpenAI client would send) goes through the same passes and
the same gate as live traffic, with the same config. The command prints the findings,
the assembled request and the budget report, and exits non-zero when a finding has
severity ``error``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.json import JSON
from rich.table import Table

from gateway.assembly.budget_report import BudgetReport, budget_report
from gateway.assembly.context import Context, Decision, Env, SessionState
from gateway.assembly.lint_context import violations
from gateway.assembly.pipeline import Assembly, assemble
from gateway.assembly.policy import Policy
from gateway.assembly.request import context_from_body
from gateway.config import Settings
from gateway.errors import RequestError
from gateway.tokens import counter_for, encoding_for_model
from gateway.upstream.model_info import model_info

BAR_WIDTH = 30


@dataclass(frozen=True, slots=True)
class LintResult:
    assembly: Assembly
    budget: BudgetReport

    @property
    def findings(self) -> list[Decision]:
        return [d for d in self.assembly.decisions if d.pass_name == "lint_context"]

    @property
    def failed(self) -> bool:
        return bool(violations(self.assembly.decisions))

    def to_dict(self) -> dict[str, Any]:
        return {
            "failed": self.failed,
            "findings": [d.to_dict() for d in self.findings],
            "decisions": [d.to_dict() for d in self.assembly.decisions],
            "reverted": self.assembly.reverted,
            "assembled": self.assembly.assembled.body(),
            "budget": self.budget.to_dict(),
        }


def context_for(body: Mapping[str, Any], settings: Settings) -> Context:
    """The Context the gateway would build for this body (no caller, a fresh session)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("the request body needs a non-empty 'messages' list", param="messages")
    model_name = str(body.get("model") or "gpt-4o-mini")
    configured = settings.model(model_name)
    litellm_model = configured.litellm_model if configured else model_name
    encoding = (configured.tokenizer if configured else None) or encoding_for_model(litellm_model)
    env = Env(
        counter=counter_for(encoding),
        context_window=model_info(litellm_model, configured.context_window if configured else None).context_window,
        model=model_name,
        provider=configured.provider if configured else "openai",
    )
    return context_from_body(body, env, SessionState("lint"))


def lint_request(body: Mapping[str, Any], settings: Settings, *, assemble_first: bool = True) -> LintResult:
    """Run the configured pipeline (or only the gate, on the body as sent) and the budget report."""
    policy: Policy = settings.policy
    if not assemble_first:
        policy = policy.all_disabled().model_copy(update={"lint": policy.lint.model_copy(update={"enabled": True})})
    result = assemble(context_for(body, settings), policy)
    return LintResult(result, budget_report(result.assembled))


def _bar(share: float) -> str:
    filled = round(max(0.0, min(1.0, share)) * BAR_WIDTH)
    return "█" * filled + "·" * (BAR_WIDTH - filled)


def budget_table(report: BudgetReport) -> Table:
    table = Table(title=f"Budget: {report.model}, window {report.context_window:,} tokens")
    for name, justify in (("component", "left"), ("tokens", "right"), ("window", "right"), ("used", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    table.add_column("share of used prompt")
    table.add_column("flag")
    for line in report.lines:
        flag = f"[red]waste > 30 %[/red]: {line.suggestion}" if line.waste else ""
        used = "" if line.component == "reserve" else f"{line.share_of_used:.0%}"
        bar = "" if line.component == "reserve" else _bar(line.share_of_used)
        table.add_row(line.component, f"{line.tokens:,}", f"{line.share_of_window:.1%}", used, bar, flag)
    fits = "fits" if report.fits else "[red]does not fit[/red]"
    table.caption = f"prompt {report.prompt_tokens:,} + reserve {report.reserve:,} tokens: {fits}"
    return table


def findings_table(result: LintResult) -> Table:
    table = Table(title="Validation gate")
    table.add_column("check")
    table.add_column("severity")
    table.add_column("finding")
    for d in result.findings:
        severity = str(d.detail.get("severity"))
        style = "red" if severity == "error" else "yellow"
        table.add_row(str(d.detail.get("check")), f"[{style}]{severity}[/{style}]", d.reason)
    if not result.findings:
        table.add_row("all", "[green]ok[/green]", "the context passes every check")
    return table


def print_result(result: LintResult, console: Console) -> None:
    console.print(findings_table(result))
    changes = [d for d in result.assembly.decisions if d.pass_name != "lint_context"]
    for d in changes:
        console.print(f"[bold]{d.pass_name}[/bold] {d.action}: {d.reason}")
    console.rule("assembled request")
    console.print(JSON.from_data(result.assembly.assembled.body()))
    console.print(budget_table(result.budget))
    verdict = "[red]FAILED[/red]" if result.failed else "[green]passed[/green]"
    console.print(
        f"lint {verdict}: {len(violations(result.assembly.decisions))} error(s), {len(result.findings)} finding(s)"
    )
