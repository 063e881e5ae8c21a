"""The ElasticJob's names and labels: what the stack renders (infra/specs), the controller reads
(controller/) and the jobs' pods carry, written once."""

from __future__ import annotations

GROUP, VERSION, KIND, PLURAL = "elastic.pytorch.org", "v1alpha1", "ElasticJob", "elasticjobs"
API_VERSION = f"{GROUP}/{VERSION}"
WORKER = "Worker"  # the one replica type (spec.replicaSpecs.Worker)
# The controller reads exit codes from this container only, as the archived one did
# (pytorch/elastic api/v1alpha1/constants.go); it gets the rendezvous arguments.
WORKER_CONTAINER = "elasticjob-worker"
# On the Job and on every pod: which ElasticJob they belong to (the controller's watches select by it).
ELASTICJOB_LABEL = f"{GROUP}/elasticjob"
SPEC_HASH_ANNOTATION = f"{GROUP}/spec-hash"
# The stack's labels on the workloads: which run, which workload (the NetworkPolicies admit training
# pods by JOB_LABEL), and the training pods' component.
RUN_LABEL = "elastic-training/run"
JOB_LABEL = "elastic-training/job"
TRAINING_COMPONENT = "training"
