"""``advisor hardware``: what this machine is, and how fast it multiplies matrices."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from advisor.cli import app
from advisor.cli._common import err, out, print_json, user_errors


@app.command("hardware")
@user_errors
def hardware_command(
    calibrate: Annotated[bool, typer.Option(
        "--calibrate", help="Measure float32 GEMM GFLOP/s at 1, 2, 4, ... threads and cache the result.")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Print the profile as JSON.")] = False,
) -> None:
    """Show the CPU, cores, memory, BLAS libraries and GPUs of this machine.

    Example: advisor hardware --calibrate
    """
    from advisor import hardware

    if calibrate:
        err.print("calibrating GEMM speed (one process per thread count)...")
        profile = hardware.calibrate()
    else:
        profile = hardware.detect()
    if json_output:
        print_json(profile.to_dict())
        return
    table = Table(title=f"hardware profile {profile.profile_id}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    table.add_row("CPU", profile.cpu_model)
    table.add_row("cores", f"{profile.physical_cores} physical, {profile.logical_cores} logical")
    table.add_row("affinity", ", ".join(map(str, profile.affinity)))
    table.add_row("memory", f"{profile.memory_gb:.1f} GiB")
    table.add_row("system", f"{profile.system} {profile.machine}")
    for lib in profile.blas:
        table.add_row(
            f"{lib.get('user_api', '?')} library",
            f"{lib.get('internal_api', '?')} {lib.get('version') or ''} ({lib.get('num_threads', '?')} threads)",
        )
    if profile.gpus:
        for gpu in profile.gpus:
            table.add_row(f"GPU {gpu.index}", f"{gpu.name}, {gpu.memory_mb:.0f} MiB, driver {gpu.driver or '?'}")
    else:
        table.add_row("GPU", "none found")
    if profile.gemm_gflops:
        speeds = sorted(profile.gemm_gflops.items(), key=lambda kv: int(kv[0]))
        table.add_row("GEMM GFLOP/s", ", ".join(f"{t} threads: {v:.1f}" for t, v in speeds))
    else:
        table.add_row("GEMM GFLOP/s", "not calibrated (advisor hardware --calibrate)")
    out.print(table)
