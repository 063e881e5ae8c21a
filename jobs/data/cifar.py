"""CIFAR-10's on-disk python format: read it safely, check it, and write a synthetic stand-in.

The folder `cifar-10-batches-py/` holds `data_batch_1..5` (training), `test_batch` and
`batches.meta`, each a pickled dict. A data batch has `data` (uint8, N x 3072: 1024 red, then
1024 green, then 1024 blue values, row-major 32x32) and `labels` (N ints in 0..9). The
official files are Python 2 pickles; read with encoding="latin1" their keys are `str`, while
files pickled by Python 3 with `bytes` keys (as ours are) keep `bytes` keys: we accept both.

numpy only, no torch: `jobs.data.prepare` imports this and must stay quick to start.
"""

from __future__ import annotations

import hashlib
import io
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from jobs.cli import RunCannotContinue

FOLDER_NAME = "cifar-10-batches-py"
TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_FILE = "test_batch"
META_FILE = "batches.meta"
REQUIRED_FILES = (*TRAIN_FILES, TEST_FILE, META_FILE)
# Present only in generated data sets, so every job can say loudly that the data is fake.
SYNTHETIC_MARKER = "SYNTHETIC"

IMAGE_SHAPE = (3, 32, 32)
PIXELS_PER_IMAGE = 3 * 32 * 32
CLASS_NAMES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
NUM_CLASSES = len(CLASS_NAMES)


class DataError(RunCannotContinue):
    """The data folder is missing, incomplete, not in CIFAR-10's format, or not what jobs.data.prepare
    recorded: a retry reads the same files (exit 3)."""


@dataclass(frozen=True)
class CifarSplit:
    images: np.ndarray  # uint8, (N, 3, 32, 32)
    labels: np.ndarray  # int64, (N,)
    class_names: tuple[str, ...]
    synthetic: bool


# A pickle can run arbitrary code when loaded, and these files come from the network.
# CIFAR-10 needs nothing beyond numpy arrays, so nothing else may be loaded.
_ALLOWED_PICKLE_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"),  # written by Python 2 / numpy 1 (the official files)
    ("numpy._core.multiarray", "_reconstruct"),  # written by numpy 2
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),  # how Python 3 pickles `bytes` at protocol 2
}


class _NumpyOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) not in _ALLOWED_PICKLE_GLOBALS:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}: not part of CIFAR-10's format")
        if module.startswith("numpy.core."):  # numpy 2 renamed numpy.core; the old name warns
            module = "numpy._core." + module.removeprefix("numpy.core.")
        return super().find_class(module, name)


def _check_against_record(path: Path, raw: bytes, recorded: dict) -> None:
    expected = recorded.get("files", {}).get(path.name)
    if expected is None:
        raise DataError(f"{path} is not in the record jobs.data.prepare wrote for its folder: rerun jobs.data.prepare")
    if len(raw) != expected["bytes"]:
        why = f"{len(raw)} bytes, {expected['bytes']} when prepared"
    elif hashlib.sha256(raw).hexdigest() != expected["sha256"]:
        why = "its content changed since it was prepared (SHA-256 differs)"
    else:
        return
    raise DataError(f"{path} does not match the data jobs.data.prepare recorded: {why}; rerun jobs.data.prepare, "
                    "which rebuilds what does not match")  # fmt: skip


def _text(value) -> str:
    return value.decode("latin1") if isinstance(value, bytes) else value


def _read_pickle(path: Path, recorded: dict | None = None) -> dict[str, object]:
    """`recorded`: jobs.data.prepare's record of the folder (jobs.data.data_record); the file must match
    its SHA-256 there, checked on the bytes read here (no second read)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path} is missing; a CIFAR-10 folder needs {', '.join(REQUIRED_FILES)}") from None
    except OSError as error:
        raise DataError(f"cannot read {path}: {error.strerror}") from None
    if recorded is not None:
        _check_against_record(path, raw, recorded)
    try:
        content = _NumpyOnlyUnpickler(io.BytesIO(raw), encoding="latin1").load()
    except Exception as error:  # a damaged pickle can raise almost anything
        raise DataError(f"{path} is not a CIFAR-10 pickle ({error})") from None
    if not isinstance(content, dict):
        raise DataError(f"{path} is not a CIFAR-10 pickle (holds a {type(content).__name__}, not a dict)")
    return {_text(key): value for key, value in content.items()}


def read_batch_file(path: Path, recorded: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """One data/test batch as (uint8 images N x 3 x 32 x 32, int64 labels)."""
    content = _read_pickle(path, recorded)
    data, labels = content.get("data"), content.get("labels")
    if (
        not isinstance(data, np.ndarray)
        or data.dtype != np.uint8
        or data.ndim != 2
        or data.shape[1] != PIXELS_PER_IMAGE
    ):
        raise DataError(f"{path}: 'data' must be a uint8 array of N x {PIXELS_PER_IMAGE} pixels")
    if not isinstance(labels, list) or len(labels) != len(data):
        raise DataError(f"{path}: 'labels' must be a list with one label per image ({len(data)})")
    label_array = np.asarray(labels, dtype=np.int64)
    if label_array.size and (label_array.min() < 0 or label_array.max() >= NUM_CLASSES):
        raise DataError(f"{path}: labels must lie in 0..{NUM_CLASSES - 1}")
    return data.reshape(-1, *IMAGE_SHAPE), label_array


def read_class_names(folder: Path, recorded: dict | None = None) -> tuple[str, ...]:
    meta_path = Path(folder) / META_FILE
    names = _read_pickle(meta_path, recorded).get("label_names")
    if not isinstance(names, list) or len(names) != NUM_CLASSES:
        raise DataError(f"{meta_path}: 'label_names' must list {NUM_CLASSES} class names")
    return tuple(_text(name) for name in names)


def _check_folder_exists(folder: Path) -> None:
    if not folder.is_dir():
        raise DataError(
            f"data folder {folder} does not exist; pass the {FOLDER_NAME} folder that `python -m jobs.data.prepare` wrote"
        )
    if not (folder / META_FILE).exists() and (folder / FOLDER_NAME / META_FILE).exists():
        raise DataError(f"{folder} is the folder above the data: pass {folder / FOLDER_NAME}")


def load_split(folder: Path | str, split: str, recorded: dict | None = None) -> CifarSplit:
    """The 'train' split (data_batch_1..5) or the 'test' split (test_batch), fully in memory;
    every file checked against `recorded` (jobs.data.prepare's record, jobs.data.data_record) when given."""
    folder = Path(folder)
    _check_folder_exists(folder)
    files = {"train": TRAIN_FILES, "test": (TEST_FILE,)}[split]
    parts = [read_batch_file(folder / name, recorded) for name in files]
    images = np.concatenate([images for images, _ in parts]) if len(parts) > 1 else parts[0][0]
    labels = np.concatenate([labels for _, labels in parts])
    if len(images) == 0:
        raise DataError(f"{folder}: the {split} split holds no images")
    return CifarSplit(images, labels, read_class_names(folder, recorded), is_synthetic(folder))


def check_folder(folder: Path) -> int:
    """Read every file of a CIFAR-10 folder, raising DataError if any is unusable; returns the image count."""
    folder = Path(folder)
    _check_folder_exists(folder)
    read_class_names(folder)
    return sum(len(read_batch_file(folder / name)[1]) for name in (*TRAIN_FILES, TEST_FILE))


def is_synthetic(folder: Path) -> bool:
    return (Path(folder) / SYNTHETIC_MARKER).exists()


# --- synthetic data -------------------------------------------------------------------------


def _class_prototypes(rng: np.random.Generator) -> np.ndarray:
    """One blocky colour pattern per class: a 4x4 grid of random colours blown up to 32x32."""
    coarse = rng.uniform(0, 255, size=(NUM_CLASSES, 3, 4, 4)).astype(np.float32)
    return coarse.repeat(8, axis=2).repeat(8, axis=3)


def _generate_images(labels: np.ndarray, prototypes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Images a CNN can learn but not perfectly: each is its class's pattern blended with a
    random other class's pattern (weight 0.45..1, so a few are dominated by the other class)
    plus pixel noise. Accuracy therefore tops out around 90 %, which keeps a quality gate testable."""
    images = np.empty((len(labels), PIXELS_PER_IMAGE), dtype=np.uint8)
    for start in range(0, len(labels), 1024):  # in chunks: float temporaries stay small and cache-warm
        chunk = labels[start : start + 1024]
        others = (chunk + rng.integers(1, NUM_CLASSES, size=len(chunk))) % NUM_CLASSES
        own_weight = rng.uniform(0.45, 1.0, size=(len(chunk), 1, 1, 1)).astype(np.float32)
        blend = prototypes[others]
        blend += own_weight * (prototypes[chunk] - blend)
        # Uniform noise of width 140 (standard deviation 40): 3x cheaper to draw than Gaussian noise.
        blend += (rng.random(size=blend.shape, dtype=np.float32) - 0.5) * 140
        images[start : start + len(chunk)] = np.clip(blend, 0, 255).round().reshape(len(chunk), -1)
    return images


def _write_pickle(path: Path, content: dict[bytes, object]) -> None:
    # Same dicts, keys and value types as the official files, which is what CIFAR-10 readers
    # see through `pickle.load(f, encoding="bytes")`. The official files are Python 2 pickles
    # (protocol 2); Python 3 can only write `bytes` at protocol 2 as latin-1 text, 1.5x larger
    # and 10x slower to load, so we use protocol 4, which every Python 3 reader loads the same way.
    with open(path, "wb") as file:
        pickle.dump(content, file, protocol=4)


def _write_batch(path: Path, batch_label: str, labels: np.ndarray, images: np.ndarray) -> None:
    _write_pickle(
        path,
        {
            b"batch_label": batch_label.encode(),
            b"labels": labels.tolist(),
            b"data": images,
            b"filenames": [f"synthetic_{CLASS_NAMES[label]}_{i}.png".encode() for i, label in enumerate(labels)],
        },
    )


def synthetic_test_images_per_class(train_images_per_class: int) -> int:
    # CIFAR-10 has 5000 training and 1000 test images per class: keep that ratio.
    return max(1, train_images_per_class // 5)


def write_synthetic(
    folder: Path, images_per_class: int, seed: int = 0, test_images_per_class: int | None = None
) -> None:
    """Write a complete CIFAR-10-format folder of generated images into `folder` (created).
    `images_per_class` training images per class; the test split gets a fifth of that as in
    CIFAR-10, unless `test_images_per_class` says otherwise (tests want a larger test split)."""
    if test_images_per_class is None:
        test_images_per_class = synthetic_test_images_per_class(images_per_class)
    folder = Path(folder)
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    prototypes = _class_prototypes(rng)

    # Every class appears images_per_class times, spread at random over the five batches.
    train_labels = rng.permutation(np.repeat(np.arange(NUM_CLASSES), images_per_class))
    per_batch = len(train_labels) // len(TRAIN_FILES)  # exact: 10 * N is divisible by 5
    for number, name in enumerate(TRAIN_FILES, start=1):
        labels = train_labels[(number - 1) * per_batch : number * per_batch]
        _write_batch(folder / name, f"training batch {number} of 5", labels, _generate_images(labels, prototypes, rng))

    test_labels = rng.permutation(np.repeat(np.arange(NUM_CLASSES), test_images_per_class))
    _write_batch(
        folder / TEST_FILE, "testing batch 1 of 1", test_labels, _generate_images(test_labels, prototypes, rng)
    )

    _write_pickle(
        folder / META_FILE,
        {
            b"num_cases_per_batch": per_batch,
            b"label_names": [name.encode() for name in CLASS_NAMES],
            b"num_vis": PIXELS_PER_IMAGE,
        },
    )
    (folder / SYNTHETIC_MARKER).write_text(
        f"Generated by `python -m jobs.data.prepare --synthetic {images_per_class}` (seed {seed}).\n"
        "These are NOT CIFAR-10 images: accuracy measured on them says nothing about CIFAR-10.\n"
    )
