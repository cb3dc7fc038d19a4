"""A Ray cluster of real nodes on 127.0.0.1, started with Ray's own ``ray start`` (tests and benchmarks).

    python tools/ray_cluster.py --nodes 2 --cpus 2     # starts a head and a worker; Ctrl-C stops them

Each node is ``ray start --block`` in a process group of its own, so one node can be killed whole (its raylet
and its workers, as when a machine dies) while the others go on; :func:`stop` ends every group. Nodes announce
127.0.0.1, so no traffic leaves the loopback. Ray's usage statistics are off.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path


class RayClusterError(RuntimeError):
    """A node did not come up."""


@dataclass
class Node:
    """One ``ray start --block`` process group."""

    process: subprocess.Popen[bytes]
    log: Path
    head: bool
    killed: bool = False

    def kill(self) -> None:
        """Kill the node whole (SIGKILL to its group: the raylet and every worker on it)."""
        self.killed = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)


@dataclass
class Cluster:
    """A head and its workers on 127.0.0.1."""

    address: str
    home: Path
    nodes: list[Node] = field(default_factory=list)

    @property
    def workers(self) -> list[Node]:
        """The nodes but the head."""
        return [n for n in self.nodes if not n.head]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ray() -> str:
    found = Path(sys.executable).parent / "ray"
    if found.exists():
        return str(found)
    which = shutil.which("ray")
    if which is None:
        raise RayClusterError('the ray command is missing: pip install "metakg[ray]"')
    return which


def _env() -> dict[str, str]:
    return {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_ADDRESS": ""}


def _node(args: list[str], log: Path, head: bool) -> Node:
    with log.open("wb") as out:
        process = subprocess.Popen(
            [_ray(), "start", "--block", "--node-ip-address=127.0.0.2", *args],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=_env(),
        )  # fmt: skip
    return Node(process, log, head)


def _alive(address: str) -> int:
    """How many nodes the cluster at ``address`` counts alive (0: not answering)."""
    probe = (
        "import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False); "
        "print(sum(n['Alive'] for n in ray.nodes()))"
    )
    done = subprocess.run([sys.executable, "-c", probe, address], capture_output=True, text=True, env=_env(),
                          timeout=120, check=False)  # fmt: skip
    lines = done.stdout.strip().splitlines()
    return int(lines[-1]) if done.returncode == 0 and lines and lines[-1].isdigit() else 0


def start(home: Path, *, nodes: int = 2, cpus: int = 1, object_store_mb: int = 150, timeout: float = 120) -> Cluster:
    """Start a head and ``nodes - 1`` workers, each with ``cpus`` CPUs, and wait until all are alive. Ray's
    sockets go under ``home``, whose path must be short (a Unix socket's path is at most 107 bytes).

    Raises:
        RayClusterError: a node did not come up within ``timeout`` seconds (its log is named).
    """
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    # Ray turns "127.0.0.1" and "localhost" into the machine's own network address; another loopback address
    # (the GCS listens on all of them) keeps every connection on the loopback
    address = f"127.0.0.2:{port}"
    cluster = Cluster(address, home)
    common = [f"--num-cpus={cpus}", f"--object-store-memory={object_store_mb * 2**20}", "--disable-usage-stats"]
    head_args = [
        "--head", f"--port={port}", f"--temp-dir={home / 'ray'}", "--include-dashboard=false",
        f"--dashboard-port={free_port()}", f"--dashboard-agent-listen-port={free_port()}",
        f"--node-manager-port={free_port()}", f"--object-manager-port={free_port()}", *common,
    ]  # fmt: skip
    try:
        cluster.nodes.append(_node(head_args, home / "head.log", head=True))
        _wait(cluster, 1, timeout)
        for _ in range(1, nodes):
            add_node(cluster, cpus=cpus, object_store_mb=object_store_mb, timeout=timeout)
    except BaseException:
        stop(cluster)
        raise
    return cluster


def add_node(cluster: Cluster, *, cpus: int = 1, object_store_mb: int = 150, timeout: float = 120) -> Node:
    """Start one more worker node and wait until the cluster counts it alive (a node killed before is not).

    Raises:
        RayClusterError: it did not come up within ``timeout`` seconds.
    """
    args = [
        f"--address={cluster.address}", f"--node-manager-port={free_port()}", f"--object-manager-port={free_port()}",
        f"--dashboard-agent-listen-port={free_port()}", f"--num-cpus={cpus}",
        f"--object-store-memory={object_store_mb * 2**20}", "--disable-usage-stats",
    ]  # fmt: skip
    alive = sum(n.process.poll() is None for n in cluster.nodes)
    node = _node(args, cluster.home / f"worker{len(cluster.nodes)}.log", head=False)
    cluster.nodes.append(node)
    _wait(cluster, alive + 1, timeout)
    return node


def _wait(cluster: Cluster, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for node in cluster.nodes:
            if node.process.poll() is not None and not node.killed:
                raise RayClusterError(f"a Ray node exited: {node.log.read_text(errors='replace')[-2000:]}")
        if _alive(cluster.address) >= count:
            return
        time.sleep(1)
    raise RayClusterError(f"{count} Ray nodes were not alive within {timeout:g} s (logs in {cluster.home})")


def stop(cluster: Cluster) -> None:
    """Kill every node (workers first, then the head)."""
    for node in [*cluster.workers, *(n for n in cluster.nodes if n.head)]:
        node.kill()


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--cpus", type=int, default=1)
    parser.add_argument("--home", type=Path, default=Path("/tmp/metakg-ray"))
    args = parser.parse_args()
    cluster = start(args.home, nodes=args.nodes, cpus=args.cpus)
    print(f"RAY_ADDRESS={cluster.address}  ({len(cluster.nodes)} nodes; Ctrl-C stops them)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        stop(cluster)


if __name__ == "__main__":
    main()
