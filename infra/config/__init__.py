"""Stack configuration: every key, its type, default, description and rule, validated once.

`load_settings()` turns the raw stack config (what `pulumi config` holds) into a frozen `Settings`
before any resource is registered. A bad value raises `ConfigError`, one line naming the key, the
value and what is allowed. The package, one concern a file:

  keys.py        the key table (CONFIG_KEYS) and each key's rule on its own value
  parsers.py     raw config text into typed values (integers, booleans, lists, quantities)
  relations.py   rules that tie keys together (worker counts, GPU fit, target existing, support dates)
  images.py      what an image reference pins, and the pull policy that follows
  settings.py    Settings and load_settings, plus values derived from settings
  provider_keys.py  the `aws:` keys a stack may set: those the installed pulumi-aws reads
  capacity.py    the worker pool's instance types and the rules of a Spot pool
  epoch_time.py  epochs that cannot finish inside jobTimeoutMinutes at a measured rate (a warning)
  stack_file.py  reading stacks/Pulumi.<stack>.yaml and -c overrides as the Pulumi CLI would
  errors.py      ConfigError

The names below are the package's public face: `from infra.config import load_settings`.
"""

from infra.config.errors import ConfigError
from infra.config.images import image_pull_policy, pins_the_image
from infra.config.keys import (
    ACCESS_MODES,
    CIFAR10_MD5,
    CIFAR10_URL,
    CLOUDWATCH_LOG_RETENTION_DAYS,
    CONFIG_KEYS,
    CPU,
    CUDA,
    EKS,
    EXISTING,
    IMAGE_VARIANTS,
    INSTANCE_TYPE,
    KEYS_BY_NAME,
    MAX_SYNTHETIC_PER_CLASS,
    NCCL_SHM_MIN_MIB,
    PROJECT,
    READ_WRITE_MANY,
    READ_WRITE_ONCE,
    RESERVED_NAMESPACES,
    SYNTHETIC_DEFAULT_PER_CLASS,
    TARGETS,
    ConfigKey,
)
from infra.config.parsers import PARSERS, memory_mib
from infra.config.capacity import CAPACITY_TYPES, ON_DEMAND, SPOT
from infra.config.settings import (
    Settings,
    data_md5_for,
    efa_interfaces_per_node,
    gpus_per_node,
    image_variant,
    is_gpu_stack,
    load_settings,
    worker_instance_types,
)

__all__ = [
    "ACCESS_MODES",
    "CIFAR10_MD5",
    "CIFAR10_URL",
    "CLOUDWATCH_LOG_RETENTION_DAYS",
    "CONFIG_KEYS",
    "CPU",
    "CUDA",
    "EKS",
    "EXISTING",
    "IMAGE_VARIANTS",
    "INSTANCE_TYPE",
    "KEYS_BY_NAME",
    "MAX_SYNTHETIC_PER_CLASS",
    "NCCL_SHM_MIN_MIB",
    "PARSERS",
    "PROJECT",
    "READ_WRITE_MANY",
    "READ_WRITE_ONCE",
    "RESERVED_NAMESPACES",
    "SYNTHETIC_DEFAULT_PER_CLASS",
    "TARGETS",
    "ConfigError",
    "ConfigKey",
    "Settings",
    "data_md5_for",
    "efa_interfaces_per_node",
    "gpus_per_node",
    "image_pull_policy",
    "image_variant",
    "is_gpu_stack",
    "load_settings",
    "memory_mib",
    "pins_the_image",
    "CAPACITY_TYPES",
    "ON_DEMAND",
    "SPOT",
    "worker_instance_types",
]
