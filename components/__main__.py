"""``python -m components …``: the offline CLI (``components.tools.cli``)."""

import gc

from .tools.cli import main

if __name__ == "__main__":
    # One command per process: what is loaded by now (the CLI and what it imports) lives until exit,
    # so the collector leaves it alone (gc.freeze), and collects the young objects a plan makes
    # (thousands per resource) less often. A 405B plan: ~0.6 s faster, same peak memory.
    gc.freeze()
    gc.set_threshold(20_000, 20, 10)
    raise SystemExit(main())
