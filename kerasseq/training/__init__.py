"""Losses, metrics, schedules, callbacks, training runs and distributed training."""

from kerasseq.training.averaging import (
    KeepLastCheckpoints,
    average_checkpoints,
    epoch_checkpoints,
)
from kerasseq.training.callbacks import (
    DevBleuEarlyStopping,
    NonFiniteLossError,
    ScheduledSampling,
    StopOnNonFiniteLoss,
    TimeLimit,
    all_weights_finite,
    teacher_forcing_probability,
)
from kerasseq.training.losses import (
    MaskedSparseCategoricalCrossentropy,
    guided_alignment_loss,
)
from kerasseq.training.metrics import MaskedTokenAccuracy
from kerasseq.training.run import TrainingRun
from kerasseq.training.schedules import TransformerSchedule, transformer_optimizer
from kerasseq.training.trainer import DistributedTrainer, sharded_dataset_fn

__all__ = [
    "DevBleuEarlyStopping",
    "DistributedTrainer",
    "KeepLastCheckpoints",
    "MaskedSparseCategoricalCrossentropy",
    "MaskedTokenAccuracy",
    "NonFiniteLossError",
    "ScheduledSampling",
    "StopOnNonFiniteLoss",
    "TimeLimit",
    "TrainingRun",
    "TransformerSchedule",
    "all_weights_finite",
    "average_checkpoints",
    "epoch_checkpoints",
    "guided_alignment_loss",
    "sharded_dataset_fn",
    "teacher_forcing_probability",
    "transformer_optimizer",
]
