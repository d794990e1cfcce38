"""torchrun for Debian's torch 1.13 on Python 3.11: `python3 torchrun_py311.py ARGS` is
`torchrun ARGS`.

torch 1.13's Std.from_str looks a redirect value up by iterating the IntFlag `Std`,
and Python 3.11 no longer yields the zero member (Std.NONE) when iterating a flag
enum, so the default `--redirects 0` becomes None and torchrun dies in to_map with
"'NoneType' object has no attribute 'get'". This parses the value directly; nothing else
of torchrun changes.
"""
import re
import sys

from torch.distributed.elastic.multiprocessing import api


def _from_str(vm):
    if re.fullmatch(r"[0-3]", vm):
        return api.Std(int(vm))
    if re.fullmatch(r"(\d+:[0-3],)*\d+:[0-3]", vm):
        return {int(k): api.Std(int(v)) for k, v in (kv.split(":") for kv in vm.split(","))}
    raise ValueError(f"{vm} does not match a Std value or a map of local rank to Std")


api.Std.from_str = staticmethod(_from_str)

from torch.distributed.run import main  # noqa: E402  (after the patch)

if __name__ == "__main__":
    sys.exit(main())
