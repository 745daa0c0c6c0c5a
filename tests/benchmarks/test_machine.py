"""The machine line the latency benchmarks print beside their figures."""

from __future__ import annotations

from pathlib import Path

from benchmarks.machine import cpu_model, describe, summary


def _root(tmp_path: Path, *, halt_poll: str | None, driver: str | None) -> Path:
    (tmp_path / "proc").mkdir(parents=True)
    (tmp_path / "proc" / "cpuinfo").write_text(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\n\nprocessor\t: 1\nmodel name\t: AMD EPYC\n"
    )
    if halt_poll is not None:
        params = tmp_path / "sys/module/haltpoll/parameters"
        params.mkdir(parents=True)
        (params / "guest_halt_poll_ns").write_text(halt_poll + "\n")
    if driver is not None:
        cpuidle = tmp_path / "sys/devices/system/cpu/cpuidle"
        cpuidle.mkdir(parents=True)
        (cpuidle / "current_driver").write_text(driver + "\n")
    return tmp_path


def test_a_guest_that_halts_at_once_is_said_so(tmp_path: Path) -> None:
    machine = describe(_root(tmp_path, halt_poll="0", driver="haltpoll"))
    assert machine["cpu"] == "AMD EPYC"
    assert (machine["cpuidle_driver"], machine["guest_halt_poll_ns"]) == ("haltpoll", 0)
    line = summary(machine)
    assert line.startswith("machine: AMD EPYC, ")
    assert "cpuidle haltpoll, guest_halt_poll_ns 0 (an idle vCPU halts at once)" in line


def test_a_guest_that_polls_first_and_a_machine_with_neither_file(tmp_path: Path) -> None:
    polling = describe(_root(tmp_path / "a", halt_poll="200000", driver="haltpoll"))
    assert polling["guest_halt_poll_ns"] == 200000
    assert "halts at once" not in summary(polling) and "guest_halt_poll_ns 200000" in summary(polling)
    bare = describe(_root(tmp_path / "b", halt_poll=None, driver=None))
    assert (bare["cpuidle_driver"], bare["guest_halt_poll_ns"]) == (None, None)
    assert "cpuidle" not in summary(bare) and "halt" not in summary(bare)


def test_the_cpu_model_is_the_first_named_one() -> None:
    assert cpu_model("processor : 0\nmodel name : Intel(R) Xeon(R)\nmodel name : other\n") == "Intel(R) Xeon(R)"
    assert cpu_model("processor : 0\nCPU part : 0xd0c\n") is None  # an Arm machine names no model there


def test_this_machine_is_described() -> None:
    machine = describe()
    assert machine["cpus"] and machine["cpus"] >= 1 and machine["kernel"]
    assert machine["load_1m"] is not None and f"load {machine['load_1m']} before the run" in summary(machine)
