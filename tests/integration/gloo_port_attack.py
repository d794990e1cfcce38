#!/usr/bin/python3
"""The attacker of test_gloo_ports.sh, in two roles (system python3, no modules).

scan JOB_PID SECONDS  (as root: the test's eyes) prints, every few milliseconds, the TCP
    ports on which the job's worker processes (children of JOB_PID) listen, found through
    /proc/<pid>/fd and /proc/net/tcp{,6}.
attack SECONDS        (as the second local user) reads ports on stdin and, for each one,
    connects and sends an 8-byte sequence number and 64 random bytes, then holds the
    connection for a second. Prints how many connections it tried and how many got in.
"""
import os, select, socket, struct, sys, time


def children(pid):
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def listening_ports(pids):
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    link = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            pass
    ports = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                next(f)
                for line in f:
                    p = line.split()
                    if p[3] == "0A" and p[9] in inodes:  # LISTEN
                        ports.add(int(p[1].rsplit(":", 1)[1], 16))
        except OSError:
            pass
    return ports


def scan(job, seconds):
    end = time.time() + seconds
    while time.time() < end:
        for port in sorted(listening_ports(children(job))):
            try:
                print(port, flush=True)
            except BrokenPipeError:
                return
        time.sleep(0.002)


def attack(seconds):
    end = time.time() + seconds
    tried = connected = 0
    held = []  # (socket, close at)
    seq = 0
    buf = b""
    while time.time() < end:
        r, _, _ = select.select([sys.stdin], [], [], 0.01)
        if r:
            chunk = os.read(sys.stdin.fileno(), 4096)
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in set(lines):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.settimeout(0.2)
                tried += 1
                try:
                    s.connect(("127.0.0.1", int(line)))
                    seq += 1
                    s.sendall(struct.pack("<q", seq) + os.urandom(64))
                    connected += 1
                    held.append((s, time.time() + 1))
                except OSError:
                    s.close()
        now = time.time()
        for s, until in [h for h in held if h[1] <= now]:
            s.close()
        held = [h for h in held if h[1] > now]
    print(f"attacker: {tried} connections tried, {connected} got in and sent bytes", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "scan":
        scan(int(sys.argv[2]), float(sys.argv[3]))
    else:
        attack(float(sys.argv[2]))
