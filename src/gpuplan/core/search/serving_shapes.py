"""The server counts a serving search tries after timing one server of each size: as many as the load needs
(the replicas the capacity within the objectives asks for), fewest GPUs first; or 2, 4 and 8 servers of the largest
size when no replica fits one (pipeline stages across servers). Pure."""

from __future__ import annotations

from collections.abc import Callable


def serve_more(gpu_id: str, top: int, max_servers: int, status: str, want: dict[tuple[str, int], int],
               tried: set[tuple[int, int]], kept: Callable[[], bool], evaluate: Callable[[int, int], str]) -> None:
    """Evaluate (GPUs per server, servers) shapes until one is kept. `want`: the servers the load needs, by (GPU,
    GPUs per server), filled in by `evaluate`; `status`: the last single-server shape's outcome."""
    queue = sorted(((ps, s) for (g, ps), s in want.items() if g == gpu_id and 1 < s <= max_servers),
                   key=lambda t: (t[0] * t[1], t[0]))
    if not queue and status == "no-fit":
        queue = [(top, s) for s in (2, 4, 8) if s <= max_servers]
    while queue and not kept():
        ps, servers = queue.pop(0)
        if (ps, servers) in tried:
            continue
        tried.add((ps, servers))
        got = evaluate(ps, servers)
        need = want.get((gpu_id, ps), 0)
        if got == "deadline" and servers < need <= max_servers and (ps, need) not in tried:
            queue.insert(0, (ps, need))  # a replica fits now: as many servers as the load needs


__all__ = ["serve_more"]
