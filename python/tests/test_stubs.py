"""The checked-in `.pyi` matches the compiled module (mypy.stubtest), and the package is
typed (`py.typed`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import turngate

ALLOWLIST = Path(__file__).with_name("stubtest_allowlist.txt")


def test_package_is_typed() -> None:
    assert (Path(turngate.__file__).parent / "py.typed").is_file()
    assert (Path(turngate.__file__).parent / "_turngate.pyi").is_file()


def test_stubtest() -> None:
    # mypy is a test dependency (`pip install ./python[test]`); without it this fails.
    import mypy  # noqa: F401

    cmd = [sys.executable, "-m", "mypy.stubtest", "turngate", "--allowlist", str(ALLOWLIST)]
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=Path(__file__).parent)
    assert run.returncode == 0, f"stubtest failed:\n{run.stdout}\n{run.stderr}"


def test_the_tests_type_check_against_the_stubs() -> None:
    """The stubs are usable: this suite type-checks under `mypy --strict` with them."""
    tests = Path(__file__).parent
    cmd = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(tests)]
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=tests)
    assert run.returncode == 0, f"mypy failed:\n{run.stdout}\n{run.stderr}"


TYPED = Path(__file__).with_name("typed")


def test_a_typed_use_passes_mypy_strict() -> None:
    cmd = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(TYPED / "usage.py")]
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=TYPED)
    assert run.returncode == 0, f"mypy failed:\n{run.stdout}\n{run.stderr}"


def test_a_typed_use_passes_basedpyright_strict() -> None:
    # basedpyright is a test dependency (scripts/test-python installs it); without it this fails.
    exe = Path(sys.executable).with_name("basedpyright")
    cmd = [str(exe), "--pythonpath", sys.executable, "--level", "error",
           "-p", str(TYPED / "pyrightconfig.json"), str(TYPED / "usage.py")]
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=TYPED)
    assert run.returncode == 0, f"basedpyright failed:\n{run.stdout}\n{run.stderr}"
