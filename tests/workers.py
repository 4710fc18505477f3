"""Multi-worker jobs on 127.0.0.1 for tests: one process per worker, TF_CONFIG each."""

import json
import os
import socket
import subprocess


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_workers(command, count=2, env=None, timeout=600):
    """Run `command` (argv list) as `count` workers of one job; returns their outputs.

    Each process gets `TF_CONFIG` naming all workers on 127.0.0.1 and its own
    index. `command` may be a callable `index -> argv`. All are killed if one
    runs past `timeout`; a non-zero exit fails with that worker's output.
    """
    workers = [f"127.0.0.1:{free_port()}" for _ in range(count)]
    processes = []
    for index in range(count):
        config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        process_env = dict(os.environ if env is None else env, TF_CONFIG=json.dumps(config),
                           TF_CPP_MIN_LOG_LEVEL="2")
        argv = command(index) if callable(command) else command
        processes.append(subprocess.Popen(argv, env=process_env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
    outputs = []
    for process in processes:
        try:
            output, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for each in processes:
                each.kill()
            raise
        assert process.returncode == 0, output[-4000:]
        outputs.append(output)
    return outputs
