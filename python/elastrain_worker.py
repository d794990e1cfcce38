"""elastrain_worker: the optional channel between a program run by `elastrain launch`
and the elastrain worker that supervises it (docs/launch.md). Standard library only;
copy this file next to your script or put its folder on PYTHONPATH.

Nothing here is needed: a script written for torchrun runs unchanged under
`elastrain launch`. What the module adds:

    import elastrain_worker as ew
    import torch                      # heavy imports first ...
    ew.wait_for_assignment()          # ... then, with warm_spares=true, wait here for a rank
    ...
    for step in range(start, steps):
        loss = train_step()
        ew.report_step(step + 1, loss=loss, tokens=tokens_per_step)  # dashboard, goodput, hang detection
        # or, timed: report_step(step + 1, loss=loss, step_seconds=t, compute_seconds=t - allreduce_t)
        # and each collective wrapped, for a hang's diagnosis: with ew.collective("allreduce"): ...
        if ew.stop_requested():       # a resize, `elastrain stop` or a preemption notice
            save(step + 1); ew.checkpoint_committed(step + 1); break

Outside elastrain (plain python, torchrun) every call is a cheap no-op: connected() is
False, wait_for_assignment() returns at once, stop_requested() is None.

Once imported under elastrain, a daemon thread sends a heartbeat every second; from then
on the worker's liveness follows this process: one that is stopped (SIGSTOP) or frozen
for worker_heartbeat_timeout is killed as hung.
"""

import contextlib
import json
import math
import os
import socket
import threading
import time

__all__ = [
    "connected", "wait_for_assignment", "report_step", "checkpoint_committed",
    "stop_requested", "stop_deadline", "checkpoint_period", "control", "collective",
]
_COLLECTIVE_KINDS = ("allreduce", "allgather", "reduce_scatter", "broadcast", "barrier", "exchange", "connect")

_HEARTBEAT_SECONDS = 1.0
_MAX_LINE = 1 << 20


class _Channel:
    def __init__(self, fd):
        self._sock = socket.socket(fileno=fd)
        self._sock.setblocking(True)
        self._send_lock = threading.Lock()
        self._buf = b""
        self._assign = None
        self._control = {"stop": False, "reason": "", "deadline": 0.0, "checkpoint_period": 0}
        self.alive = True

    def send(self, msg):
        line = (json.dumps(msg, separators=(",", ":"), allow_nan=False) + "\n").encode()
        with self._send_lock:
            try:
                self._sock.sendall(line)
            except OSError:
                self.alive = False  # the worker is gone; this process dies with it

    def _take(self, msg):
        if not isinstance(msg, dict):
            return
        if msg.get("type") == "assign" and isinstance(msg.get("env"), dict):
            self._assign = {str(k): str(v) for k, v in msg["env"].items()}
        elif msg.get("type") == "control":
            for key in self._control:
                if key in msg:
                    self._control[key] = msg[key]

    def read(self, timeout):
        """Takes whatever the worker sent within `timeout` seconds (0: what is there)."""
        self._sock.settimeout(timeout)
        try:
            while True:
                chunk = self._sock.recv(65536)
                if not chunk:
                    self.alive = False
                    break
                self._buf += chunk
                if len(self._buf) > _MAX_LINE and b"\n" not in self._buf:
                    self._buf = b""  # a line this long is not from elastrain
                self._sock.settimeout(0)
        except (BlockingIOError, socket.timeout, InterruptedError):
            pass
        except OSError:
            self.alive = False
        finally:
            self._sock.settimeout(None)
        while b"\n" in self._buf:
            line, self._buf = self._buf.split(b"\n", 1)
            try:
                self._take(json.loads(line))
            except ValueError:
                pass


_channel = None


def _connect():
    global _channel
    fd = os.environ.get("ELASTRAIN_CHANNEL_FD")
    if not fd or not fd.isdigit():
        return
    try:
        ch = _Channel(int(fd))
    except OSError:
        return  # not a socket (a stale variable): behave as outside elastrain
    _channel = ch
    ch.send({"type": "hello", "pid": os.getpid(), "warm": os.environ.get("ELASTRAIN_WARM") == "1"})

    def beat():
        while ch.alive:
            time.sleep(_HEARTBEAT_SECONDS)
            ch.send({"type": "heartbeat"})

    threading.Thread(target=beat, name="elastrain-heartbeat", daemon=True).start()


def connected():
    """True when this process runs under `elastrain launch` and talks to its worker."""
    return _channel is not None and _channel.alive


def wait_for_assignment(store_timeout=60.0):
    """Returns once this process has its rank, and rank 0's store is up.

    A warm spare (warm_spares=true) was started before its generation existed: this
    blocks until the worker hands it a rank, then sets RANK, WORLD_SIZE, MASTER_ADDR, ...
    in os.environ (and returns them). Then, on every rank but 0, it waits (up to
    `store_timeout` seconds) until rank 0's store at MASTER_ADDR:MASTER_PORT accepts
    connections: rank 0's own program hosts it (as under torchrun without an agent
    store), and torch 1.13 retries a refused connection only after a whole second.
    Outside elastrain it returns {} at once."""
    if not connected():
        return {}
    env = {}
    if os.environ.get("ELASTRAIN_WARM") == "1":
        _channel.send({"type": "waiting"})
        while _channel._assign is None:
            if not _channel.alive:
                raise SystemExit("elastrain worker is gone before assigning a rank")
            _channel.read(1.0)
        env = dict(_channel._assign)
        os.environ.update(env)
        os.environ["ELASTRAIN_WARM"] = "0"
    _await_store(store_timeout)
    return env


def _await_store(timeout):
    addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT", "")
    if os.environ.get("RANK", "0") == "0" or not addr or not port.isdigit():
        return
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection((addr, int(port)), timeout=1.0).close()
            return
        except OSError:
            time.sleep(0.01)


def report_step(step, loss=None, tokens=None, step_seconds=None, compute_seconds=None, **metrics):
    """Tells elastrain that `step` (counted as you count them, >= 0) completed.

    loss: the step's training loss; tokens: tokens of the step over all ranks (for
    tokens/s); step_seconds: its duration (measured between reports when omitted);
    compute_seconds: the part of it this rank computed (forward, backward, update, its
    own I/O), the rest having been spent waiting in collectives (all-reduce, ...): the
    step anatomy by which elastrain finds a slow rank (when omitted the whole step counts
    as compute); metrics: up to 32 further numbers for metrics.jsonl."""
    if not connected():
        return
    # JSON has no NaN or infinity: a diverged loss is left out, the step still counts.
    msg = {"type": "step", "step": int(step)}
    if loss is not None and math.isfinite(float(loss)):
        msg["loss"] = float(loss)
    if tokens is not None:
        msg["tokens"] = int(tokens)
    if step_seconds is not None and math.isfinite(float(step_seconds)):
        msg["step_seconds"] = float(step_seconds)
    if compute_seconds is not None and math.isfinite(float(compute_seconds)) and float(compute_seconds) >= 0:
        # At most step_seconds: a clock's rounding must not cost the whole report.
        msg["compute_seconds"] = min(float(compute_seconds), msg.get("step_seconds", float(compute_seconds)))
    finite = {str(k): float(v) for k, v in metrics.items() if math.isfinite(float(v))}
    if finite:
        msg["metrics"] = finite
    _channel.send(msg)


def checkpoint_committed(step, seconds=None):
    """Tells elastrain a checkpoint of `step` is durable (written and renamed into place).

    seconds: how long training was blocked by the save (goodput; checkpoint_period=auto)."""
    if not connected():
        return
    msg = {"type": "checkpoint", "step": int(step)}
    if seconds is not None and math.isfinite(float(seconds)):
        msg["seconds"] = float(seconds)
    _channel.send(msg)


_collective_lock = threading.Lock()
_collective_seq = -1


@contextlib.contextmanager
def collective(kind="allreduce"):
    """Wrap each collective: `with ew.collective("allreduce"): dist.all_reduce(t)`.

    Tells elastrain which collective this process entered (numbered from 0) and when it
    left it, two short lines on a local socket. When a generation hangs, elastrain names
    the rank behind by these: the one stopped inside, or the one that never entered the
    collective the others wait in (docs/launch.md "Hang detection"). kind: allreduce,
    allgather, reduce_scatter, broadcast, barrier, exchange or connect."""
    if kind not in _COLLECTIVE_KINDS:
        raise ValueError("collective kind %r: expected one of %s" % (kind, ", ".join(_COLLECTIVE_KINDS)))
    if not connected():
        yield
        return
    global _collective_seq
    with _collective_lock:
        _collective_seq += 1
        seq = _collective_seq
    _channel.send({"type": "collective", "seq": seq, "kind": kind, "inside": True})
    try:
        yield
    finally:
        _channel.send({"type": "collective", "seq": seq, "kind": kind, "inside": False})


def control():
    """The worker's latest word: {"stop", "reason", "deadline", "checkpoint_period"}."""
    if not connected():
        return {"stop": False, "reason": "", "deadline": 0.0, "checkpoint_period": 0}
    _channel.read(0)
    return dict(_channel._control)


def stop_requested():
    """None, or why this generation must end: "resize", "user" or "preemption".

    Save a checkpoint and exit 0 before stop_deadline()."""
    c = control()
    return (c.get("reason") or "resize") if c.get("stop") else None


def stop_deadline():
    """The wall time (time.time()) by which a requested stop must be done (0: none)."""
    return float(control().get("deadline") or 0.0)


def checkpoint_period(default):
    """The checkpoint period in steps elastrain suggests: the job's checkpoint_period, or
    with checkpoint_period=auto the one computed from this rank's reported save cost and
    the job's failures (ranks may differ: take rank 0's and broadcast it). `default`
    outside elastrain."""
    p = control().get("checkpoint_period") or 0
    return int(p) if int(p) > 0 else int(default)


_connect()
