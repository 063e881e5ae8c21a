"""Code that runs inside the data-prep, training and test pods, and unchanged on a laptop.

Entry points (the Kubernetes Jobs call exactly these):

    python -m jobs.data.prepare  --dest DIR [--source URL|PATH|s3://bucket/key] [--md5 HEX] [--synthetic N]
    torchrun ... -m jobs.training.train --data DIR/cifar-10-batches-py --run-dir RUN_DIR [--epochs 10] ...
    python -m jobs.results.evaluate --data DIR/cifar-10-batches-py --model RUN_DIR/model.pt [--min-accuracy X]

This package never imports pulumi, and `jobs.data.prepare` never imports torch (it stays fast
and light). Exit codes shared by all three: 0 success, 1 bad data / source / run state,
2 bad command line, 3 quality gate not met (evaluate only).
"""
