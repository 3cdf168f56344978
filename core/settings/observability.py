"""Settings of tracing (core/tracing.py) and of the latency SLOs goodput counts against (api/slo.py)."""

from pydantic import BaseModel, Field


class TracingSettings(BaseModel):
    enabled: bool = Field(
        default=False, description="Export OpenTelemetry traces over OTLP/HTTP. Off: no spans are made."
    )
    otlp_endpoint: str = Field(
        default="http://127.0.0.1:4318/v1/traces", description="OTLP/HTTP traces endpoint (a collector)."
    )
    sample_ratio: float = Field(
        default=1.0, ge=0, le=1, description="Share of new traces kept (a caller's sampled flag wins)."
    )
    record_content: bool = Field(
        default=False,
        description="Put prompts, questions and document text on spans. Off: only ids, sizes and timings.",
    )
    export_delay_ms: int = Field(default=2000, ge=10, description="Batching delay before spans are sent.")


class RouteSlo(BaseModel):
    ttft_s: float = Field(default=3.0, gt=0, description="Arrival to the first answer token.")
    tpot_s: float = Field(default=0.25, gt=0, description="Mean gap between answer tokens.")
    e2e_s: float = Field(default=60.0, gt=0, description="Arrival to the end of the answer.")


class SloSettings(BaseModel):
    window_s: float = Field(
        default=300.0, gt=0, description="groundwork:goodput is the share of this window's requests."
    )
    # Defaults sized for the packaged CPU model (benchmarks.qa); a GPU deployment should tighten them.
    routes: dict[str, RouteSlo] = Field(
        default_factory=lambda: {"ask": RouteSlo(), "chat": RouteSlo()},
        description="Latency SLOs per route (ask, chat); a request counts as good if it meets all three.",
    )
