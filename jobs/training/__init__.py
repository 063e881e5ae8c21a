"""The training loop: the training Job (train) and what it is made of: the network (model), the
recipes, one epoch (loop), the process group (distributed), the device (runtime), checkpoints
(checkpoint, progress) and the step trace (sample_trace)."""
