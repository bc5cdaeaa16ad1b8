# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""One rank of a 2-process torch.distributed job (Gloo, CPU) training on the
transformers stand-in with joule.hf.EnergyCallback() and its default
monitor (test_frameworks_distributed.py starts it). Writes rank<N>.json."""
import json
import os
import sys

import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import framework_standins as standins  # noqa: E402

sys.modules["transformers"] = standins  # the stand-in (has TrainerCallback and friends)

import joule.hf  # noqa: E402
import joule.meter  # noqa: E402


def main(out_dir: str) -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    args = standins.TrainingArguments(output_dir=os.path.join(out_dir, "out"), per_device_train_batch_size=4,
                                      gradient_accumulation_steps=2, num_train_epochs=2, logging_steps=2,
                                      eval_strategy="steps", eval_steps=4, save_steps=5, world_size=world,
                                      include_num_input_tokens_seen="all")
    cb = joule.hf.EnergyCallback()
    monitor = joule.meter.default_monitor()
    trainer = standins.Trainer(args, callbacks=[cb], monitor=monitor, tokens_per_step=512, rank=rank,
                               world_size=world)
    trainer.train()
    dist.barrier()
    result = {"rank": rank, "measuring": monitor is not None,
              "gpus": [g["index"] for g in monitor.gpus] if monitor is not None else [],
              "layout": joule.meter.process_layout().mode, "summary": cb.summary,
              "logged": [logs for logs in trainer.reporter.logged if "joule/energy_j" in logs]}
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f, default=str)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
