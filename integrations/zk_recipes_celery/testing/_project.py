"""Real ``celery worker`` and ``celery beat`` processes for a test, and what they record.

- :class:`CeleryProject`: a temporary directory holding the app modules a test
  writes (or a directory of yours), and every ``celery worker`` / ``celery beat``
  started from it, each a :class:`CeleryProcess` in its own process group,
  logging to its own file. :meth:`CeleryProject.close` stops them all, pool
  children included, so no worker outlives its test.
- Every process gets ``REDIS_URL``, ``RECORD_FILE`` and :attr:`CeleryProject.env`
  in its environment. App modules report what happened with
  :func:`zk_recipes_celery.testing.record`; the test reads it back with
  :meth:`CeleryProject.read_records` and :meth:`CeleryProject.wait_records`.

Every wait polls (every 50 ms) against a deadline; nothing sleeps for a fixed time.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from zk_recipes.testing import HarnessError

POLL_INTERVAL = 0.05
LOG_TAIL_LINES = 200
#: The worker logs ``<name>@<host> ready.`` once it consumes (Celery's ``worker_ready``).
WORKER_READY = " ready."
#: Beat logs this once its service starts.
BEAT_READY = "beat: Starting..."

#: One line of ``RECORD_FILE``: the fields given to ``record()``, plus ``pid`` and ``t``.
Record = dict[str, Any]


def _tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(text.splitlines()[-lines:])


# --------------------------------------------------------------------------- processes


class CeleryProcess:
    """One ``celery worker`` or ``celery beat``, leader of its own process group.

    The group holds the MainProcess and, for a prefork worker, its pool children.
    :meth:`stop` and :meth:`kill_group` signal the whole group; :meth:`kill`
    SIGKILLs the group leader (the worker MainProcess) only, as a crash of the
    parent would: its pool children are then orphans, left to notice that on
    their own (and killed at teardown by :meth:`stop`).
    """

    def __init__(self, kind: str, name: str, argv: list[str], log_path: Path, **popen: Any) -> None:
        self.kind = kind
        self.name = name
        self.argv = argv
        self.log_path = log_path
        with log_path.open("wb") as log:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                **popen,
            )
        self.pid: int = self._proc.pid
        self.pgid: int = self.pid  # start_new_session: the leader's pid is the group id
        # Once the group is seen empty its id is free: with pid_max at 32768 the
        # kernel can hand it to a new session (a harness JVM) later in the run,
        # so the group is never signalled again.
        self._group_gone = False

    def __repr__(self) -> str:
        return f"<CeleryProcess {self.kind} {self.name} pid={self.pid} rc={self.returncode}>"

    @property
    def returncode(self) -> int | None:
        return self._proc.poll()

    def is_alive(self) -> bool:
        """Whether the group leader (the MainProcess) is still running."""
        return self._proc.poll() is None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return _tail(self.log(), lines)

    def wait_log(self, text: str, timeout: float = 30.0) -> str:
        """Poll until the log contains ``text``; return the log. AssertionError on timeout/exit."""
        deadline = time.monotonic() + timeout
        while True:
            exited = not self.is_alive()
            log = self.log()  # read after the exit check: an exiting process's last words count
            if text in log:
                return log
            if exited:
                raise AssertionError(
                    f"{self!r} exited before logging {text!r}; log tail:\n{_tail(log)}"
                )
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"{self!r}: no {text!r} in the log after {timeout:.1f}s; log tail:\n"
                    f"{_tail(log)}"
                )
            time.sleep(POLL_INTERVAL)

    def wait_exit(self, timeout: float) -> int:
        """Wait for the MainProcess to exit; return its exit code. AssertionError on timeout."""
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{self!r} still running after {timeout:.1f}s; log tail:\n{self.log_tail()}"
            ) from None

    def _signal_group(self, sig: int) -> bool:
        if self._group_gone:
            return False
        try:
            os.killpg(self.pgid, sig)
        except ProcessLookupError:
            self._group_gone = True
            return False
        return True

    def kill(self) -> int:
        """SIGKILL the group leader only (the worker MainProcess); return its exit code."""
        if self.is_alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        return self._proc.wait(10)

    def kill_group(self) -> int:
        """SIGKILL the whole process group; return the leader's exit code."""
        self._signal_group(signal.SIGKILL)
        return self._proc.wait(10)

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM the group, wait ``timeout`` for the leader, then SIGKILL the group.

        Whatever is left of the group (pool children orphaned by :meth:`kill`, or
        ignoring SIGTERM) is SIGKILLed too. Returns the leader's exit code.
        """
        if self.is_alive():
            self._signal_group(signal.SIGTERM)
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
        self._signal_group(signal.SIGKILL)  # stragglers; ESRCH when the group is gone
        try:
            self._proc.wait(5)
        except subprocess.TimeoutExpired:
            return None
        self._wait_group_gone(5.0)
        return self._proc.returncode

    def _wait_group_gone(self, timeout: float) -> bool:
        """Poll until no process is left in the group (orphans are reaped by init)."""
        deadline = time.monotonic() + timeout
        while self._signal_group(0):
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL_INTERVAL)
        return True


# --------------------------------------------------------------------------- project


class CeleryProject:
    """App modules in a directory, and the Celery processes started from them.

    ``base_dir`` holds ``app/`` (the modules :meth:`write_app` writes, the
    processes' working directory, first on their ``PYTHONPATH``), ``logs/`` and
    ``records.jsonl``. Give ``app_dir`` to run the modules of an existing project
    instead, and ``pythonpath`` for more import roots. The processes run
    ``python`` (this interpreter by default), so they import the packages
    installed for the test run.
    """

    def __init__(
        self,
        base_dir: Path,
        redis_url: str,
        extra_env: Mapping[str, str] | None = None,
        *,
        app_dir: Path | None = None,
        pythonpath: Sequence[Path] = (),
        python: str = sys.executable,
    ) -> None:
        self.base_dir = base_dir
        self.app_dir = app_dir or base_dir / "app"
        self.log_dir = base_dir / "logs"
        self.record_file = base_dir / "records.jsonl"
        for directory in (self.app_dir, self.log_dir):
            directory.mkdir(parents=True, exist_ok=True)
        self.redis_url = redis_url
        self.pythonpath = list(pythonpath)
        self.python = python
        #: Extra environment for every process started after it is set (e.g. ``ZK_HOSTS``).
        self.env: dict[str, str] = dict(extra_env or {})
        self.processes: list[CeleryProcess] = []
        self._clients: list[Any] = []

    # -- app modules and environment

    def write_app(self, source: str, module: str = "proj") -> str:
        """Write ``<module>.py`` into the app directory; return the module name."""
        (self.app_dir / f"{module}.py").write_text(source)
        return module

    def subprocess_env(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        paths = [str(self.app_dir), *map(str, self.pythonpath)]
        inherited = os.environ.get("PYTHONPATH")
        if inherited:
            paths.append(inherited)
        result = dict(os.environ)
        result.update(
            PYTHONPATH=os.pathsep.join(paths),
            PYTHONUNBUFFERED="1",
            REDIS_URL=self.redis_url,
            RECORD_FILE=str(self.record_file),
        )
        result.update(self.env)
        result.update(env or {})
        return result

    def _spawn(
        self, kind: str, name: str, argv: list[str], env: Mapping[str, str] | None
    ) -> CeleryProcess:
        log_path = self.log_dir / f"{kind}-{name}-{len(self.processes)}.log"
        proc = CeleryProcess(
            kind, name, argv, log_path, cwd=self.app_dir, env=self.subprocess_env(env)
        )
        self.processes.append(proc)
        return proc

    def _wait_started(self, proc: CeleryProcess, text: str, timeout: float) -> None:
        try:
            proc.wait_log(text, timeout)
        except AssertionError as exc:
            raise HarnessError(f"{proc.kind} {proc.name!r} did not start: {exc}") from None

    # -- processes

    def start_worker(
        self,
        module: str,
        *,
        pool: str = "prefork",
        concurrency: int = 2,
        name: str = "w1",
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        wait_ready: bool = True,
        timeout: float = 30.0,
    ) -> CeleryProcess:
        """Start ``celery worker``; unless ``wait_ready=False``, return once it logs "ready."."""
        argv = [
            self.python, "-m", "celery", "-A", module, "worker",
            "-l", "INFO", "-P", pool, "-c", str(concurrency), "-n", f"{name}@%h",
            "--without-gossip", "--without-mingle", "--without-heartbeat",
            *args,
        ]  # fmt: skip
        proc = self._spawn("worker", name, argv, env)
        if wait_ready:
            self._wait_started(proc, WORKER_READY, timeout)
        return proc

    def start_beat(
        self,
        module: str,
        *,
        name: str = "b1",
        scheduler: str | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        wait_ready: bool = True,
        timeout: float = 30.0,
    ) -> CeleryProcess:
        """Start ``celery beat`` (``--max-interval 1``); return once it logs "beat: Starting..."."""
        argv = [
            self.python, "-m", "celery", "-A", module, "beat", "-l", "INFO",
            "-s", str(self.base_dir / f"{name}-schedule"), "--max-interval", "1",
        ]  # fmt: skip
        if scheduler is not None:
            argv += ["-S", scheduler]
        argv += list(args)
        proc = self._spawn("beat", name, argv, env)
        if wait_ready:
            self._wait_started(proc, BEAT_READY, timeout)
        return proc

    # -- records

    def read_records(self) -> list[Record]:
        """Every complete JSON line of ``RECORD_FILE`` (none if it does not exist yet)."""
        try:
            text = self.record_file.read_text()
        except FileNotFoundError:
            return []
        lines = text.split("\n")[:-1]  # the part after the last newline is not a whole line
        return [json.loads(line) for line in lines if line]

    def wait_records(
        self, predicate: Callable[[list[Record]], bool], timeout: float = 20.0
    ) -> list[Record]:
        """Poll :meth:`read_records` until ``predicate(records)``; AssertionError on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            records = self.read_records()
            if predicate(records):
                return records
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"records did not satisfy the predicate within {timeout:.1f}s: {records!r}"
                )
            time.sleep(POLL_INTERVAL)

    # -- client

    def client_app(self) -> Any:
        """An in-process ``Celery("client")`` on the broker and backend; closed at teardown."""
        from celery import Celery

        app = Celery("client", broker=self.redis_url, backend=self.redis_url)
        self._clients.append(app)
        return app

    # -- teardown

    def logs_report(self, lines: int = LOG_TAIL_LINES) -> str:
        parts = []
        for proc in self.processes:
            parts.append(f"===== {proc!r} log: {proc.log_path} (last {lines} lines) =====")
            parts.append(proc.log_tail(lines))
        return "\n".join(parts)

    def close(self) -> None:
        """Stop every process (SIGTERM the group, 10 s, SIGKILL) and close the client apps."""
        errors: list[str] = []
        for proc in reversed(self.processes):
            if proc.stop() is None:
                errors.append(f"{proc!r} did not exit after SIGKILL")
        for app in self._clients:
            app.close()
        self._clients.clear()
        if errors:
            raise HarnessError("; ".join(errors))
