"""The ElasticJob controller we maintain (issue 33): each ElasticJob (elastic.pytorch.org/v1alpha1)
becomes one native Indexed Job that it owns, so Kubernetes' own Job controller creates, retries and
replaces the worker pods; this package renders that Job, watches it and its pods, and writes the
ElasticJob's status (conditions, replica counts, the last failure, the run's progress).

A package of its own, beside infra/ and jobs/: it runs in the training image (`python -m controller`)
next to jobs/, never imports infra/ or pulumi (tests/test_architecture.py), and needs only the
`kubernetes` client (the `controller` extra). Modules:
    exit_codes   what a worker's exit code means (the project's one table, read by the Job it renders)
    render       ElasticJob -> Job (pure)
    status       Job + pods -> the ElasticJob's status (pure)
    job_indexes  Job + pods -> what the Job controller does with each index (pure)
    progress     the run's history.jsonl -> status.progress (pure, reads a file)
    lease        leader election on a coordination.k8s.io/v1 Lease
    reconcile    one pass for one ElasticJob against the API server
    watches      the watches of ElasticJobs, Jobs and pods, and the pod cache
    work_queue   the ElasticJob names to reconcile, with backoff
    __main__     the process: flags, leader election, the worker and its threads
"""
