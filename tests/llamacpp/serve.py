"""Runs llama.cpp's llama-server (through xllamacpp, in this process) on loopback.

    python serve.py MODEL.gguf PORT [--parallel 4] [--threads 2] [--ctx 8192]
        [--slot-save-path DIR] [--cache-ram MIB] [--until-stdin-closes]

Prints `listening on http://127.0.0.1:PORT` once the model is loaded, then serves until
killed, or with --until-stdin-closes until its standard input closes (the tests pass it,
so the server never outlives the test process that started it).
The total context is split over the slots: 8192 over 4 slots is 2048 tokens per request.
--slot-save-path is llama-server's own flag: without it every slot action (`POST
/slots/ID?action=erase`, which the runner's --reset-prefix-cache sends) is answered 501.
--cache-ram is llama-server's host-memory prompt cache size (-1 no limit, 0 off).
"""

import argparse
import sys
import threading

import xllamacpp


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("port", type=int)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=8192)
    ap.add_argument("--slot-save-path", default="")
    ap.add_argument("--cache-ram", type=int, default=None)
    ap.add_argument("--until-stdin-closes", action="store_true")
    args = ap.parse_args()

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.n_parallel = args.parallel
    params.n_ctx = args.ctx
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    # /metrics in Prometheus text (llama-server --metrics), scraped by the runner.
    params.endpoint_metrics = True
    params.slot_save_path = args.slot_save_path
    if args.cache_ram is not None:
        params.cache_ram_mib = args.cache_ram
    server = xllamacpp.Server(params)
    print(f"listening on {server.listening_address}", flush=True)
    # The server runs on its own threads; this one only waits.
    if args.until_stdin_closes:
        sys.stdin.read()
    else:
        threading.Event().wait()


if __name__ == "__main__":
    main()
