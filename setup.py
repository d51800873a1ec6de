"""Builds the native launcher of the short commands; everything else is in pyproject.toml.

`sbatch`, `squeue`, `sinfo` ... are installed as one small C program (cli/native/command.c) under
each name: it hands the command to the local agent's warm runner and falls back to
`shoal-command NAME` (plain Python) when none answers. Where no C compiler is found the same names
are installed as plain Python scripts instead: every command still works, only slower to start.

Beside them goes `shoal-stepd-exec` (noded/native/stepd_exec.c), which each job's supervisor runs
to exec the batch script without forking itself; without a C compiler it is left out and the
supervisor forks (more CPU per job, the same result).
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys

from setuptools import Distribution, setup

# the build_scripts command setuptools itself uses (its own distutils' one; no distutils import here)
_BuildScripts = Distribution().get_command_class("build_scripts")

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join("cli", "native", "command.c")
EXEC_HELPER_SOURCE = os.path.join("noded", "native", "stepd_exec.c")
EXEC_HELPER = "shoal-stepd-exec"  # noded.stepd.EXEC_HELPER
OUT = os.path.join("build", "shoal-commands")


def _commands() -> tuple[str, ...]:
    """cli/command.py's COMMANDS (read, not imported: the build environment has no dependencies)."""
    with open(os.path.join(HERE, "cli", "command.py"), encoding="utf-8") as fh:
        for node in ast.parse(fh.read()).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "COMMANDS" for t in node.targets):
                return tuple(ast.literal_eval(node.value))
    raise RuntimeError("cli/command.py defines no COMMANDS")


COMMANDS = _commands()
PYTHON_SCRIPT = "#!python\nimport sys\nfrom cli.{name} import main\nsys.exit(main())\n"


def _compile(
    target: str, source: str = SOURCE, failed: str = "the native commands, installing Python ones"
) -> bool:
    if os.environ.get("SHOAL_NO_NATIVE_COMMANDS") == "1":
        return False
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return False
    result = subprocess.run(
        [compiler, "-O2", "-Wall", "-o", target, os.path.join(HERE, source)], capture_output=True, text=True
    )
    if result.returncode != 0:
        print(f"shoal: cannot build {failed}:\n{result.stderr}", file=sys.stderr)
        return False
    return True


def command_scripts() -> list[str]:
    out = os.path.join(HERE, OUT)
    os.makedirs(out, exist_ok=True)
    launcher = os.path.join(out, "launcher")
    native = _compile(launcher)
    scripts = []
    for name in COMMANDS:
        path = os.path.join(out, name)
        if os.path.lexists(path):
            os.unlink(path)
        if native:
            shutil.copy2(launcher, path)
        else:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(PYTHON_SCRIPT.format(name=name))
        scripts.append(os.path.join(OUT, name))
    if _compile(
        os.path.join(out, EXEC_HELPER), EXEC_HELPER_SOURCE, f"{EXEC_HELPER} (job supervisors will fork)"
    ):
        scripts.append(os.path.join(OUT, EXEC_HELPER))
    return scripts


class BuildScripts(_BuildScripts):  # type: ignore[misc,valid-type]
    """distutils rewrites a script's #!python line; the native launcher is copied as it is."""

    def _copy_script(self, script, outfiles, updated_files):  # type: ignore[no-untyped-def]
        with open(script, "rb") as fh:
            native = fh.read(4) == b"\x7fELF"
        if not native:
            return super()._copy_script(script, outfiles, updated_files)
        outfile = os.path.join(self.build_dir, os.path.basename(script))
        outfiles.append(outfile)
        updated_files.append(outfile)
        self.copy_file(script, outfile)


setup(scripts=command_scripts(), cmdclass={"build_scripts": BuildScripts})
