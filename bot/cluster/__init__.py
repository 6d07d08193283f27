"""Several Tusk processes on one PostgreSQL database (docs: Scaling out).

    dispatch.py   the ingress side: a message stored and its turn queued in one transaction, then acknowledged;
                  what the turn said delivered to the request that waits (turn_results, LISTEN tusk_turn)
    results.py    the worker side of that: a local channel's replies and drafts written as turn_results rows
    worker.py     the worker: procrastinate runs each chat's turns one at a time across the cluster (lock per
                  chat), retries a dead worker's turn, fences a paused one (store/fence.py)
    leader.py     duties one process holds at a time (the sweep, the backup): an advisory lock
    processes.py  every process's row and heartbeat, for `tusk status`
    roles.py      what `tusk run --role all|ingress|worker` starts

On the files store none of this runs: one process, the in-process bus (bot/bus.py), as always.
"""
