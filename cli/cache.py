"""`ziggurat cache`: inspect and empty the persistent compile cache (cache.py).

    ziggurat cache info          folder, bound, entries (most recently used first)
    ziggurat cache clear         remove every compiled model (measured peaks and
                                 timings in the same root folder stay)
"""

from __future__ import annotations

import argparse
import time


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def cmd_cache(args: argparse.Namespace) -> int:
    from ziggurat import cache

    store = cache.DiskCache.default()
    if args.action == "clear":
        count, size = store.clear()
        print(f"removed {count} compiled model(s), {_mib(size)}, from {store.folder}")
        return 0
    entries = store.entries()
    state = "on" if cache.enabled() else "off (ZIGGURAT_CACHE=0; compile(cache=True) still uses it)"
    print(f"compile cache: {store.folder}")
    print(f"  {state}; {len(entries)} model(s), {_mib(sum(e.size for e in entries))} of at most {_mib(store.limit)} "
          "(ZIGGURAT_CACHE_MAX_BYTES)")
    for e in entries:
        used = time.strftime("%Y-%m-%d %H:%M", time.localtime(e.last_used))
        if e.header is None:
            print(f"  {e.path.stem[:12]}  {_mib(e.size):>10}  {used}  (unreadable: removed on its next lookup)")
            continue
        print(f"  {e.path.stem[:12]}  {_mib(e.size):>10}  {used}  {e.header.get('target', '')}  {e.header.get('model', '')}")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("cache", help="inspect (info) or empty (clear) the persistent compile cache",
                       description=__doc__.splitlines()[0], epilog="\n".join(__doc__.splitlines()[2:]),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=("info", "clear"))
    p.set_defaults(func=cmd_cache)
