"""jobs.data.cifar: reading CIFAR-10's pickle format safely, and the synthetic generator."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
from conftest import make_synthetic_cifar

from jobs.data import cifar as data


def test_synthetic_split_sizes_and_balance(tmp_path):
    folder = make_synthetic_cifar(tmp_path, train_per_class=7, test_per_class=3)
    train, test = data.load_split(folder, "train"), data.load_split(folder, "test")
    assert train.images.shape == (70, 3, 32, 32) and train.images.dtype == np.uint8
    assert np.bincount(train.labels, minlength=10).tolist() == [7] * 10
    assert np.bincount(test.labels, minlength=10).tolist() == [3] * 10
    assert train.class_names == data.CLASS_NAMES and train.synthetic
    # Spread over the five training files like CIFAR-10's: 14 images in each.
    assert [len(data.read_batch_file(folder / name)[1]) for name in data.TRAIN_FILES] == [14] * 5


def test_default_test_split_is_a_fifth_as_in_cifar10(tmp_path):
    data.write_synthetic(tmp_path / "c", images_per_class=10)
    assert len(data.load_split(tmp_path / "c", "test").labels) == 10 * 2


def test_reads_python2_style_pickles_with_str_keys(tmp_path):
    """The official files load with str keys under encoding='latin1'; ours have bytes keys."""
    folder = make_synthetic_cifar(tmp_path, 1, 1)
    images, labels = data.read_batch_file(folder / "test_batch")
    with open(folder / "test_batch", "wb") as file:
        content = {"batch_label": "testing batch 1 of 1", "labels": labels.tolist(),
                   "data": images.reshape(len(images), -1), "filenames": ["a.png"] * len(labels)}  # fmt: skip
        pickle.dump(content, file, protocol=2)
    again_images, again_labels = data.read_batch_file(folder / "test_batch")
    assert np.array_equal(again_images, images) and np.array_equal(again_labels, labels)


def test_refuses_pickles_that_would_run_code(tmp_path):
    class Exploit:
        def __reduce__(self):
            return (os.system, ("touch " + str(tmp_path / "pwned"),))

    folder = make_synthetic_cifar(tmp_path, 1, 1)
    (folder / "data_batch_2").write_bytes(pickle.dumps({b"data": Exploit()}, protocol=2))
    with pytest.raises(data.DataError, match="refusing to load"):
        data.load_split(folder, "train")
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize(
    "content, message",
    [
        ({b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]}, "uint8 array of N x 3072"),
        ({b"data": np.zeros((2, 3072), np.float32), b"labels": [0, 1]}, "uint8 array"),
        ({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0]}, "one label per image"),
        ({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0, 10]}, r"labels must lie in 0\.\.9"),
        ([1, 2, 3], "not a dict"),
    ],
)
def test_rejects_malformed_batches(tmp_path, content, message):
    path = tmp_path / "data_batch_1"
    path.write_bytes(pickle.dumps(content, protocol=4))
    with pytest.raises(data.DataError, match=message):
        data.read_batch_file(path)


def test_missing_folder_and_wrong_level_are_explained(tmp_path):
    with pytest.raises(data.DataError, match="does not exist"):
        data.load_split(tmp_path / "nowhere", "train")
    make_synthetic_cifar(tmp_path, 1, 1)
    with pytest.raises(data.DataError, match="pass .*cifar-10-batches-py"):
        data.load_split(tmp_path, "train")
    (tmp_path / data.FOLDER_NAME / "data_batch_4").unlink()
    with pytest.raises(data.DataError, match="data_batch_4 is missing"):
        data.check_folder(tmp_path / data.FOLDER_NAME)


def test_synthetic_data_is_deterministic_per_seed(tmp_path):
    first = make_synthetic_cifar(tmp_path / "a", 3, 1, seed=5)
    second = make_synthetic_cifar(tmp_path / "b", 3, 1, seed=5)
    other = make_synthetic_cifar(tmp_path / "c", 3, 1, seed=6)
    assert (first / "data_batch_1").read_bytes() == (second / "data_batch_1").read_bytes()
    assert (first / "data_batch_1").read_bytes() != (other / "data_batch_1").read_bytes()


def test_synthetic_classes_are_learnable_but_not_trivial(tmp_path):
    """A nearest-class-mean classifier (no training loop) already separates the classes,
    yet the class-blending keeps it well below 100 %: real signal, and a gate can fail."""
    folder = make_synthetic_cifar(tmp_path, train_per_class=100, test_per_class=100)
    train, test = data.load_split(folder, "train"), data.load_split(folder, "test")
    means = np.stack([train.images[train.labels == c].reshape(-1, 3072).mean(0) for c in range(10)])
    distances = ((test.images.reshape(-1, 1, 3072).astype(np.float32) - means[None]) ** 2).sum(-1)
    accuracy = (distances.argmin(1) == test.labels).mean()
    assert 0.5 < accuracy < 0.99
