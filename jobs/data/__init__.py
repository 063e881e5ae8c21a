"""The data: CIFAR-10's format (cifar), the data-prep Job (prepare) and its record of the data
(data_record), augmentation (transforms) and
the one sample order of every epoch at any world size (sampling)."""
