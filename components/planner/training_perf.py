"""Training figures of a multislice MaxText run: step time and MFU, tokens/s per chip, checkpoint size and
restore time per tier, the ramdisk a host needs, cost per training hour per capacity tier, the cost of a
lost slice, and $ per billion training tokens.

Formulas (assumptions and sources in ``components/catalog/checkpointing.py``):

* FLOPs per step = (6 N + 12 L H Dh T) x tokens: 6 N per token for the forward and backward matmuls of
  N parameters plus the attention scores (L layers, H query heads of Dh, sequence T), PaLM (Chowdhery et
  al. 2022) Appendix B, MaxText's own TFLOP/s accounting (``maxtext_utils.calculate_tflops_training_per_device``);
  tokens = global batch x sequence length.
* compute time = FLOPs / (devices x peak bf16 FLOP/s of the generation (TPU catalog) x MFU_ASSUMED);
* DCN time = 2 (d - 1) / d x gradient bytes / (hosts per slice x DCN bandwidth per host): a ring all-reduce
  of one slice's float32 gradients between the ``d`` = dcn_data replicas, each host moving its share
  (zero on one slice). Not overlapped with compute: an upper bound (XLA overlaps part of it);
* step time = compute + DCN; predicted MFU = FLOPs / (step time x devices x peak);
* checkpoint bytes = N x (parameter bytes + OPTIMIZER_BYTES_PER_PARAM) (Orbax TrainState: params, Adam mu
  and nu); per host = checkpoint / (hosts per slice x dcn_fsdp) (a slice holds a whole replica unless
  DCN fsdp splits it);
* ramdisk per host = RAMDISK_COPIES x per-host bytes x (1 + RAMDISK_BUFFER), rounded up to a GiB
  (MaxText's MTC sizing rule, with the planner's bytes instead of its 12 B/param rule of thumb);
* restore time per tier = per-host bytes / that tier's bytes/s per host (hosts restore in parallel);
* lost slice = every slice idle for (recompute since the newest surviving checkpoint + restore from the
  newest tier that survives + RESTART_OVERHEAD_S) x the whole run's $/h. With MTC the surviving tier is
  the peer copy (the lost slice's ramdisks are gone) at ``local_checkpoint_period``; without it, the GCS
  checkpoint at ``checkpoint_period``. Recompute is the worst case, a whole period.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..catalog import checkpointing as facts
from ..catalog.models import ModelArch
from ..catalog.tpu import TpuSlice
from .multislice import MultisliceMesh
from .params import param_count
from .perf import TierPrice  # the serving model's: a capacity type and its USD per hour for the whole run

GIB = 2**30
PARAM_BYTES = {"float32": 4, "bfloat16": 2}


def flops_per_token(arch: ModelArch, seq: int) -> float:
    """6 N + 12 L H Dh T (module docstring)."""
    return 6 * param_count(arch) + 12 * arch.layers * arch.q_heads * arch.head_dim * seq


def checkpoint_bytes(arch: ModelArch, param_dtype: str = "float32") -> int:
    """Parameters and the two Adam moments, as Orbax saves MaxText's TrainState."""
    return param_count(arch) * (PARAM_BYTES[param_dtype] + facts.OPTIMIZER_BYTES_PER_PARAM)


def checkpoint_bytes_per_host(arch: ModelArch, tpu: TpuSlice, dcn_fsdp: int = 1, param_dtype: str = "float32") -> int:
    """One host's shard: a slice's replica over its hosts (and over DCN fsdp, which splits replicas)."""
    return math.ceil(checkpoint_bytes(arch, param_dtype) / (tpu.hosts * dcn_fsdp))


def ramdisk_bytes(per_host: int) -> int:
    """MTC ramdisk per host: RAMDISK_COPIES x shard x (1 + RAMDISK_BUFFER), rounded up to a whole GiB."""
    raw = facts.RAMDISK_COPIES * per_host * (1 + facts.RAMDISK_BUFFER)
    return math.ceil(raw / GIB) * GIB


def ramdisk_quantity(per_host: int) -> str:
    """:func:`ramdisk_bytes` as a Kubernetes quantity (``CheckpointConfiguration.spec.inMemoryVolumeSize``)."""
    return f"{ramdisk_bytes(per_host) // GIB}Gi"


@dataclass(frozen=True)
class TrainingEstimate:
    """The figures ``plan`` prints for a training stack (seconds, bytes, USD)."""

    model: str
    slice_key: str
    slices: int
    devices: int
    global_batch: int
    seq: int
    tokens_per_step: int
    flops_per_step: float
    compute_s: float
    dcn_s: float
    step_s: float
    mfu: float
    tokens_per_s_per_chip: float
    checkpoint_bytes: int
    checkpoint_bytes_per_host: int
    ramdisk_bytes_per_host: int
    restore_s: Mapping[str, float]
    """Tier -> seconds to read one host's shard (``local``, ``peer``, ``gcs``)."""
    prices: tuple[TierPrice, ...]
    multi_tier: bool
    checkpoint_period_steps: int
    lost_slice_recompute_s: float
    lost_slice_restore_tier: str
    lost_slice_s: float
    assumptions: Mapping[str, Any] = field(default_factory=dict)

    def lost_slice_cost(self, price: TierPrice) -> float | None:
        return None if price.usd_per_hour is None else round(price.usd_per_hour * self.lost_slice_s / 3600, 2)

    def per_billion_tokens(self, price: TierPrice) -> float | None:
        if price.usd_per_hour is None:
            return None
        tokens_per_hour = self.tokens_per_s_per_chip * self.devices * 3600
        return round(price.usd_per_hour / tokens_per_hour * 1e9, 2)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "slice": self.slice_key,
            "slices": self.slices,
            "devices": self.devices,
            "global_batch": self.global_batch,
            "tokens_per_step": self.tokens_per_step,
            "flops_per_step": self.flops_per_step,
            "step_seconds": round(self.step_s, 4),
            "compute_seconds": round(self.compute_s, 4),
            "dcn_seconds": round(self.dcn_s, 4),
            "mfu": round(self.mfu, 4),
            "tokens_per_s_per_chip": round(self.tokens_per_s_per_chip, 1),
            "checkpoint_bytes": self.checkpoint_bytes,
            "checkpoint_bytes_per_host": self.checkpoint_bytes_per_host,
            "ramdisk_bytes_per_host": self.ramdisk_bytes_per_host,
            "restore_seconds": {k: round(v, 1) for k, v in self.restore_s.items()},
            "multi_tier_checkpointing": self.multi_tier,
            "lost_slice": {
                "recompute_seconds": round(self.lost_slice_recompute_s, 1),
                "restore_tier": self.lost_slice_restore_tier,
                "seconds": round(self.lost_slice_s, 1),
            },
            "capacity": [
                {
                    "type": p.capacity,
                    "usd_per_training_hour": p.usd_per_hour,
                    "usd_per_lost_slice": self.lost_slice_cost(p),
                    "usd_per_billion_tokens": self.per_billion_tokens(p),
                }
                for p in self.prices
            ],
            "assumptions": dict(self.assumptions),
        }


def estimate(
    arch: ModelArch,
    tpu: TpuSlice,
    mesh: MultisliceMesh,
    *,
    seq: int,
    region: str | None,
    capacities: Sequence[str],
    checkpoint_period: int,
    local_checkpoint_period: int | None,
    param_dtype: str = "float32",
) -> TrainingEstimate:
    """The training figures of ``mesh`` (module docstring); ``local_checkpoint_period`` set = MTC on."""
    devices = mesh.devices
    tokens = mesh.global_batch * seq
    flops = flops_per_token(arch, seq) * tokens
    peak = tpu.generation.peak_bf16_flops_per_chip
    compute = flops / (devices * peak * facts.MFU_ASSUMED)
    replicas = mesh.dcn.get("data", 1)
    grad_bytes = param_count(arch) * PARAM_BYTES[param_dtype] / mesh.dcn.get("fsdp", 1)
    dcn = 0.0 if replicas == 1 else 2 * (replicas - 1) / replicas * grad_bytes / (tpu.hosts * tpu.dcn_bandwidth_per_host)
    step = compute + dcn
    per_host = checkpoint_bytes_per_host(arch, tpu, mesh.dcn.get("fsdp", 1), param_dtype)
    restore = {
        "local": per_host / facts.LOCAL_RESTORE_BYTES_PER_S,
        # The replicator copies the shard from the peer slice into the new host's ramdisk over DCN; Orbax
        # then restores it from there like a local checkpoint.
        "peer": per_host / tpu.dcn_bandwidth_per_host + per_host / facts.LOCAL_RESTORE_BYTES_PER_S,
        "gcs": per_host / facts.GCS_RESTORE_BYTES_PER_S,
    }
    multi_tier = local_checkpoint_period is not None
    # A lost slice takes its ramdisks with it: with MTC the newest copy left is the peer replica.
    tier, period = ("peer", local_checkpoint_period) if local_checkpoint_period is not None else ("gcs", checkpoint_period)
    recompute = period * step
    lost = recompute + restore[tier] + facts.RESTART_OVERHEAD_S
    prices = tuple(TierPrice(c, _run_price(tpu, region, c, mesh.slices)) for c in capacities)
    return TrainingEstimate(
        model=arch.name,
        slice_key=tpu.key,
        slices=mesh.slices,
        devices=devices,
        global_batch=mesh.global_batch,
        seq=seq,
        tokens_per_step=tokens,
        flops_per_step=flops,
        compute_s=compute,
        dcn_s=dcn,
        step_s=step,
        mfu=flops / (step * devices * peak),
        tokens_per_s_per_chip=tokens / step / devices,
        checkpoint_bytes=checkpoint_bytes(arch, param_dtype),
        checkpoint_bytes_per_host=per_host,
        ramdisk_bytes_per_host=ramdisk_bytes(per_host) if multi_tier else 0,
        restore_s=restore,
        prices=prices,
        multi_tier=multi_tier,
        checkpoint_period_steps=period,
        lost_slice_recompute_s=recompute,
        lost_slice_restore_tier=tier,
        lost_slice_s=lost,
        assumptions={
            "mfu_of_compute": facts.MFU_ASSUMED,
            "peak_bf16_flops_per_chip": peak,
            "dcn_bytes_per_s_per_host": tpu.dcn_bandwidth_per_host,
            "restore_bytes_per_s_per_host": {
                "local": facts.LOCAL_RESTORE_BYTES_PER_S,
                "peer": tpu.dcn_bandwidth_per_host,
                "gcs": facts.GCS_RESTORE_BYTES_PER_S,
            },
            "restart_overhead_seconds": facts.RESTART_OVERHEAD_S,
        },
    )


def _run_price(tpu: TpuSlice, region: str | None, capacity: str, slices: int) -> float | None:
    one = tpu.capacity_price(region, capacity)
    return None if one is None else round(one * slices, 4)
