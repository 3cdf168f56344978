"""The model servers `groundwork up` runs besides the API: the supervised vLLM server
(`engine.backend = "vllm"`) and `--replicas N` local engines (`groundwork engine serve`, or vLLM
servers with the vLLM backend) behind the router. Each is restarted when it dies and stopped on
exit (inference/supervisor.py)."""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass, field

from core.settings import Settings
from inference.supervisor import ServerSpec, SupervisedServer

log = logging.getLogger(__name__)

# First port of `--replicas` engines (our `groundwork engine serve` default is 8001).
REPLICA_BASE_PORT = 8201


@dataclass
class ModelServers:
    settings: Settings  # the platform's settings, pointing at the servers started
    env: dict[str, str] = field(default_factory=dict)  # the same for child processes (the worker)
    servers: list[SupervisedServer] = field(default_factory=list)

    def stop(self) -> None:
        for server in self.servers:
            server.stop()


def engine_spec(settings: Settings, port: int) -> ServerSpec:
    """One of our engines as its own OpenAI server process (`groundwork engine serve`)."""
    return ServerSpec(
        name=f"engine-{port}",
        command=[sys.executable, "-m", "cli.main", "engine", "serve", "--port", str(port)],
        health_url=f"http://127.0.0.1:{port}/health",
        log_path=settings.data_dir / "logs" / f"engine-{port}.log",
        startup_timeout_s=600.0,
    )


def start_model_servers(settings: Settings, replicas: int = 0) -> ModelServers:
    """Start what the settings ask for and wait until each answers; nothing for the in-process engine
    or an external `llm_base_url`."""
    from inference import vllm_server

    vllm = settings.engine.backend == "vllm" and not settings.engine.llm_base_url
    if not vllm and replicas <= 1:
        return ModelServers(settings)
    if vllm:
        for note in vllm_server.unsupported_features(settings):
            log.warning("vLLM backend: %s", note)
    if replicas <= 1:
        specs = [vllm_server.server_spec(settings)]
    elif vllm:
        specs = [vllm_server.server_spec(settings, settings.engine.vllm.port + i) for i in range(replicas)]
    else:
        specs = [engine_spec(settings, REPLICA_BASE_PORT + i) for i in range(replicas)]
    vllm_server.model_directory(settings)  # a GGUF converted once here, not by every server at once
    started = ModelServers(settings)
    try:
        for spec in specs:
            server = SupervisedServer(spec)
            server.start()
            started.servers.append(server)
        for server in started.servers:  # started together: they load and compile in parallel
            server.wait_ready()
            server.supervise()
    except BaseException:
        started.stop()
        raise
    if replicas > 1:
        urls = [s.spec.health_url.removesuffix("/health") + "/v1" for s in started.servers]
        started.settings = settings.model_copy(
            update={"engine": settings.engine.model_copy(update={"replicas": urls})}
        )
        started.env["GROUNDWORK_ENGINE__REPLICAS"] = json.dumps(urls)
    return started
