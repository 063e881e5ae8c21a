"""The text classifier's test command: its accuracy on sequences no worker trained on, into
$ELASTIC_TRAINING_RUN_DIR/metrics.json, where the platform's gate reads `accuracy` (gateMetric).

    python -m examples.text_classifier.evaluate [--min-accuracy 0.7]

Exit 0 when the accuracy reaches --min-accuracy, else 3 (elastic_training.exit_codes: a retry cannot help).
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from elastic_training import checkpoints, exit_codes, run_directory
from examples.text_classifier.train import BagOfTokens, batch

HELD_OUT_SEED = 10**9  # far from every training seed (step * world size + rank)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--min-accuracy", type=float, default=0.0)
    args = parser.parse_args()
    run_dir = run_directory.from_environment("run")
    model = BagOfTokens()
    model.load_state_dict(checkpoints.load_model(run_dir)["model"])
    tokens, labels = batch(HELD_OUT_SEED, 2000)
    with torch.no_grad():
        accuracy = (model(tokens).argmax(dim=1) == labels).float().mean().item()
    (run_dir / run_directory.METRICS).write_text(json.dumps({"accuracy": round(accuracy, 4)}) + "\n")
    print(f"accuracy {accuracy:.4f} (gate {args.min_accuracy})")
    return exit_codes.OK if accuracy >= args.min_accuracy else exit_codes.CANNOT_CONTINUE


if __name__ == "__main__":
    sys.exit(main())
