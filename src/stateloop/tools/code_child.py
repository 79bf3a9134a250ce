"""The sandboxed side of ``run_code``: the source of a tool, run in the source tools' sandbox,
that runs a program in one of Letta's languages and reports it as Letta's code interpreter
does (``results``, ``logs.stdout``, ``logs.stderr`` and, when it failed, ``error``).

It imports the standard library only. The program runs as a child process of the call, so the
call's limits (time, memory, processes, its /tmp) hold for it too; what it prints goes to files
in that /tmp (a bounded tmpfs) and only the first ``KEEP`` characters of each are read back.
Python's last expression, if the program ends with one, is its result, as in a notebook.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

KEEP = 100_000  # characters of stdout and of stderr handed back

# Python: the program is run by this wrapper, which evaluates a final expression as a notebook
# would and writes that value, or the exception, to the file named by its first argument.
_PYTHON = r"""
import ast, json, sys, traceback
out, path = sys.argv[1], sys.argv[2]
source = open(path, encoding="utf-8").read()
sys.argv = [path]
scope = {"__name__": "__main__", "__file__": path}
report = {"results": [], "error": None}
try:
    tree = ast.parse(source, path)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, path, "exec"), scope)
    if last is not None:
        value = eval(compile(ast.Expression(last.value), path, "eval"), scope)
        if value is not None:
            report["results"].append(repr(value))
except BaseException as exc:
    text = traceback.format_exc()
    sys.stderr.write(text)
    report["error"] = {"name": type(exc).__name__, "value": str(exc), "traceback": text}
with open(out, "w", encoding="utf-8") as handle:
    json.dump(report, handle)
"""

# Each language: the file the program is written to, and the command lines that may run it
# (the first whose program is installed).
_LANGUAGES: dict[str, tuple[str, list[list[str]], str]] = {
    # Without its JIT, V8 runs within the call's address-space limit.
    "js": ("main.js", [["node", "--jitless", "--no-expose-wasm", "{file}"]], "Node.js (node)"),
    "ts": ("main.ts", [["tsx", "{file}"], ["ts-node", "{file}"], ["deno", "run", "{file}"],
                       ["bun", "run", "{file}"]],
           "a TypeScript runtime (tsx, ts-node, deno or bun)"),
    "r": ("main.R", [["Rscript", "{file}"]], "R (Rscript)"),
    # The JVM reserves much address space: it starts with a tool memory of 1024 MB or more.
    "java": ("Main.java", [["java", "-Xshare:off", "-XX:+UseSerialGC", "-Xss512k", "-Xmx64m",
                            "-XX:ReservedCodeCacheSize=16m", "-XX:MaxMetaspaceSize=64m",
                            "-XX:CompressedClassSpaceSize=16m", "-XX:TieredStopAtLevel=1",
                            "-XX:CICompilerCount=1", "{file}"]],
             "Java (java)"),
}


def _read(path: str) -> list[str]:
    with open(path, encoding="utf-8", errors="replace") as handle:
        text = handle.read(KEEP + 1)
    if len(text) > KEEP:
        text = text[:KEEP] + f"\n[output cut at {KEEP} characters]"
    return [text] if text else []


def _program(name: str) -> str:
    """Where ``name`` is, or "" (a JDK is found under /usr/lib/jvm: the sandbox has no
    /etc/alternatives for its link in /usr/bin)."""
    found = shutil.which(name)
    if found:
        return found
    if name == "java" and os.path.isdir("/usr/lib/jvm"):
        for entry in sorted(os.listdir("/usr/lib/jvm"), reverse=True):
            candidate = os.path.join("/usr/lib/jvm", entry, "bin", "java")
            if os.access(candidate, os.X_OK):
                return candidate
    return ""


def run_code_program(code: str, language: str, seconds: float) -> str:
    """Run ``code`` written in ``language`` for at most ``seconds``; Letta's JSON report."""
    if language == "python":
        file, commands, needs = "main.py", [[sys.executable, "-I", "-c", _PYTHON, "{out}",
                                             "{file}"]], "Python"
    elif language in _LANGUAGES:
        file, commands, needs = _LANGUAGES[language]
    else:
        known = ", ".join(["python", *_LANGUAGES])
        raise ValueError(f"language must be one of {known}, not {language!r}")
    found = [[_program(argv[0]), *argv[1:]] for argv in commands if _program(argv[0])]
    if not found:
        raise RuntimeError(f"cannot run {language!r} code: {needs} is not installed on this "
                           f"server")
    work = tempfile.mkdtemp(prefix="run-code-")
    paths = {name: os.path.join(work, name) for name in (file, "stdout", "stderr", "out")}
    with open(paths[file], "w", encoding="utf-8") as handle:
        handle.write(code)
    argv = [part.replace("{file}", paths[file]).replace("{out}", paths["out"])
            for part in found[0]]
    error = None
    with open(paths["stdout"], "wb") as stdout, open(paths["stderr"], "wb") as stderr:
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                                  cwd=work, timeout=seconds, check=False)
        except subprocess.TimeoutExpired:
            error = {"name": "TimeoutError", "value": f"the program ran for more than "
                                                      f"{seconds:g} seconds and was stopped",
                     "traceback": ""}
            returncode = None
        else:
            returncode = done.returncode
    report: dict[str, object] = {"results": [], "logs": {"stdout": _read(paths["stdout"]),
                                                         "stderr": _read(paths["stderr"])}}
    if os.path.exists(paths["out"]):
        with open(paths["out"], encoding="utf-8") as handle:
            written = json.load(handle)
        report["results"] = written["results"]
        error = error or written["error"]
    elif error is None and returncode != 0:
        said = report["logs"]["stderr"]  # type: ignore[index]
        error = {"name": "ExitError", "value": f"the program exited with status {returncode}",
                 "traceback": said[0][-4000:] if said else ""}
    if error is not None:
        report["error"] = error
    shutil.rmtree(work, ignore_errors=True)
    return json.dumps(report, ensure_ascii=False)
