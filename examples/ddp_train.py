"""A minimal PyTorch DDP training script written for torchrun, that also runs unchanged
under `elastrain launch` (docs/launch.md):

    torchrun --standalone --nproc_per_node=2 examples/ddp_train.py --checkpoint-dir /tmp/ck
    elastrain launch num_workers=2 -- python3 examples/ddp_train.py --checkpoint-dir /tmp/ck

It reads only torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT through
init_process_group's env:// default). What makes it elastic is how it checkpoints:

- The global batch is fixed (--global-batch) and each step's batch is a pure function
  of (seed, step); rank r of W takes rows [r*B/W, (r+1)*B/W). DDP averages gradients, so
  a step computes the same update whatever the world size: a resize changes nothing
  but the speed.
- Rank 0 saves {model, optimizer, step} every --checkpoint-every steps, atomically
  (write a temporary file, fsync, rename), and on a stop or SIGTERM; every rank resumes
  from the newest checkpoint, whatever WORLD_SIZE it resumes with.

elastrain_worker (python/) is optional: when importable, the script reports steps and
checkpoints and listens for stop requests; without it the script is plain torchrun.

Each step report says how much of the step this rank computed and how long it waited
for the others in collectives (StepClock below): that is how elastrain tells a slow rank
from the ranks it holds up (docs/launch.md, "Step anatomy").
"""

import argparse
import contextlib
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
ew = None
if "--no-report" not in sys.argv:  # --no-report: exactly a plain torchrun script
    try:
        import elastrain_worker as ew
    except ImportError:  # elsewhere: plain torchrun
        pass

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

if ew:
    ew.wait_for_assignment()  # warm_spares: a spare waits here, torch already imported

_term = False


def _on_term(sig, frame):
    global _term
    _term = True


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--global-batch", type=int, default=48)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--checkpoint-dir", default=os.environ.get("ELASTRAIN_RUN_DIR", ".") + "/ddp_checkpoint")
    p.add_argument("--checkpoint-every", type=int, default=10)
    p.add_argument("--step-sleep", type=float, default=0.0, help="seconds of extra work per step (tests)")
    p.add_argument("--timeout", type=float, default=60.0, help="collective timeout in seconds")
    p.add_argument("--no-report", action="store_true", help="do not import elastrain_worker even if it is there")
    p.add_argument("--step-log", help="rank 0 appends '<time.time()> <step> <TORCHELASTIC_RESTART_COUNT>' per step (benchmarks)")
    return p.parse_args()


def batch(seed, step, global_batch, dim):
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    x = torch.randn(global_batch, dim, generator=g)
    w_true = torch.linspace(-1.0, 1.0, dim)
    y = torch.tanh(x @ w_true).unsqueeze(1) + 0.01 * torch.randn(global_batch, 1, generator=g)
    return x, y


class StepClock:
    """One step's seconds, split into waiting for the other ranks (the collectives, run
    inside `with clock.waiting():`) and computing (all the rest). With the elastrain
    channel, each collective is also marked (`channel.collective`), for a hang's diagnosis."""

    def __init__(self, channel=None):
        self.channel = channel

    def start(self):
        self.started, self.waited = time.time(), 0.0

    def mark(self, kind="allreduce"):
        return self.channel.collective(kind) if self.channel else contextlib.nullcontext()

    @contextlib.contextmanager
    def waiting(self, kind="allreduce"):
        t = time.time()
        try:
            with self.mark(kind):
                yield
        finally:
            self.waited += time.time() - t

    def seconds(self):
        return time.time() - self.started

    def compute_seconds(self):
        return self.seconds() - self.waited


def timed_allreduce(clock, bucket):
    """A DDP communication hook: DDP's own gradient averaging, with the all-reduce timed
    as waiting (a fast rank waits here for a slow one to finish its backward pass).
    Exactly what DDP does without a hook: multiply by 1 / world size, then sum over the
    ranks (dividing instead would round differently on 3 ranks)."""
    grads = bucket.buffer().mul_(1.0 / dist.get_world_size())
    with clock.waiting():
        dist.all_reduce(grads)
    done = torch.futures.Future()
    done.set_result(grads)
    return done


def save(path, model, opt, step):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main():
    args = parse_args()
    channel = ew if ew and not args.no_report and ew.connected() else None
    signal.signal(signal.SIGTERM, _on_term)
    import datetime
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    model = nn.Sequential(nn.Linear(args.dim, args.dim), nn.Tanh(), nn.Linear(args.dim, 1))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    os.makedirs(args.checkpoint_dir, exist_ok=True)
    path = os.path.join(args.checkpoint_dir, "checkpoint.pt")
    start = 0
    if os.path.exists(path):
        state = torch.load(path)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = state["step"]
    ddp = DDP(model)
    clock = StepClock(channel)
    ddp.register_comm_hook(clock, timed_allreduce)
    if args.global_batch % world:
        raise SystemExit(f"--global-batch {args.global_batch} must divide by WORLD_SIZE {world}")
    rows = args.global_batch // world
    print(f"START rank={rank} world={world} restart={os.environ.get('TORCHELASTIC_RESTART_COUNT')} "
          f"resumed_from={start} pid={os.getpid()}", flush=True)
    step_log = open(args.step_log, "a") if args.step_log and rank == 0 else None
    loss_fn = nn.MSELoss()
    global_loss = float("nan")
    step = start
    while step < args.steps:
        clock.start()
        x, y = batch(args.seed, step, args.global_batch, args.dim)
        x, y = x[rank * rows:(rank + 1) * rows], y[rank * rows:(rank + 1) * rows]
        opt.zero_grad()
        loss = loss_fn(ddp(x), y)
        loss.backward()
        opt.step()
        if args.step_sleep:
            time.sleep(args.step_sleep)
        step += 1
        # The loss over the whole global batch, the same number on every world size.
        total = loss.detach().clone() * rows
        with clock.waiting():
            dist.all_reduce(total)
        global_loss = (total / args.global_batch).item()
        if step_log:
            step_log.write(f"{time.time():.6f} {step} {os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}\n")
            step_log.flush()
        if channel:
            channel.report_step(step, loss=global_loss, tokens=args.global_batch, step_seconds=clock.seconds(),
                                compute_seconds=clock.compute_seconds())
        # A preemption notice (SIGTERM) or `elastrain stop`: now. A resize: at the next
        # checkpoint boundary, as elastrain's own trainer does (nothing is redone).
        reason = channel.stop_requested() if channel else None
        stop = _term or reason in ("user", "preemption") or (reason == "resize" and step % args.checkpoint_every == 0)
        # Every rank must agree to stop at the same step (a SIGTERM reaches them at
        # slightly different times): the flag is all-reduced.
        flag = torch.tensor([1.0 if stop else 0.0])
        with clock.mark("allreduce"):
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        stop = flag.item() > 0
        if step % args.checkpoint_every == 0 or stop or step == args.steps:
            if rank == 0:
                s0 = time.time()
                save(path, model, opt, step)
                if channel:
                    channel.checkpoint_committed(step, seconds=time.time() - s0)
            with clock.mark("barrier"):
                dist.barrier()
        if stop:
            print(f"STOPPED rank={rank} step={step}", flush=True)
            dist.destroy_process_group()
            return 0
    if rank == 0:
        print(f"FINAL step={step} loss={global_loss:.8f}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
