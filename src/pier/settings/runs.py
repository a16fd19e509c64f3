"""What one run may ask for and bring: its limits' defaults and ceilings, its
attached files, its variables, what collect copies out."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from pier.limits import check_memory


class RunSettings(BaseModel):
    """A run's limits (defaults and the most a run may ask for), its attached
    files, its variables and its collected outputs."""

    default_cpus: float = Field(4.0, gt=0, description="CPUs of a run that asks for none")
    default_memory: str = Field("8G", description="memory of a run that asks for none")
    default_timeout_sec: int = Field(
        1800, ge=1, description="the agent's time limit of a run that asks for none"
    )
    max_timeout_sec: int = Field(1800, ge=1, description="the longest time limit a run may ask for")
    kill_grace_sec: int = Field(
        15,
        ge=0,
        description="at the agent's time limit its processes get SIGTERM, then SIGKILL this many seconds "
        "later; what the agent writes in between is collected (0: SIGKILL at once)",
    )
    max_cpus: float = Field(64.0, gt=0, description="the most CPUs a run may ask for")
    max_memory: str = Field("64G", description="the most memory a run may ask for")
    # What the attached files of one run may become in /app/assets (zips expanded).
    max_assets_bytes: int = Field(1 << 30, ge=1, description="all attached files, zips expanded")
    max_assets_files: int = Field(10_000, ge=1, description="files in /app/assets, zip entries counted")
    max_asset_file_bytes: int = Field(512 << 20, ge=1, description="one file, or one zip entry")
    max_zip_ratio: float = Field(100.0, gt=1, description="expanded / compressed size of one zip")
    # A run's variables (strict by default: nothing wrong is accepted silently).
    allow_extra_vars: bool = Field(
        False, description="accept --var/vars keys the runbook has no variable for"
    )
    allow_unfilled_vars: bool = Field(
        False, description="leave a declared variable with no value as written instead of refusing the run"
    )
    # What collect copies out of one sandbox (results, logs, assets), checked as it streams.
    max_output_bytes: int = Field(10 << 30, ge=1, description="a run's collected outputs, in all")
    max_output_files: int = Field(100_000, ge=1, description="files in a run's collected outputs")
    max_log_bytes: int = Field(
        50 << 20,
        ge=1024,
        description="the agent's output a run's log stores (and each file of logs/ in its outputs keeps); "
        "past it the rest is dropped and counted",
    )

    @field_validator("default_memory", "max_memory")
    @classmethod
    def _memory_size(cls, value: str) -> str:
        return check_memory(value)  # sizes are read one way everywhere
