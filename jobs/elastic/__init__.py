"""The elastic machinery: the worker pod's command (agent) and the bounds it checks
(torchrun_options), torchrun with our rendezvous (torchrun,
rendezvous, rendezvous_plugin), the rendezvous store and its client (store_server,
store_client), and stopping at a step boundary when a worker is stopped or the group changes
(stopping, step_boundary, step_vote)."""
