"""What the pages claim about setup, preemption, `local`'s results and the quota agrees with the code
that decides it, and no page contradicts another (issue 30, item 6). Each claim is read from its
source: scripts/install-torch.sh, jobs/training/train.py's parser, infra/cli/local.py, stacks/Pulumi.dev.yaml."""

from __future__ import annotations

import re

import yaml

from docs_support import ROOT, doc_files, page

PAGES = [*doc_files(), ROOT / "CONTRIBUTING.md"]


def test_no_page_asks_for_an_export_that_setup_does_itself():
    """install-torch.sh hands PyTorch's CPU index to pip itself (and falls back to PyPI's build with a
    warning where it is unreachable), so no page may tell a user to export PIP_EXTRA_INDEX_URL first."""
    script = (ROOT / "scripts" / "install-torch.sh").read_text()
    assert '--extra-index-url "$TORCH_CPU_INDEX"' in script and "is not reachable; taking PyPI's torch" in script
    asking = [
        str(path.relative_to(ROOT)) for path in PAGES if re.search(r"export PIP_EXTRA_INDEX_URL", path.read_text())
    ]
    assert not asking, f"{asking} tell the user to export PIP_EXTRA_INDEX_URL; scripts/setup.sh does not need it"
    words = {
        path: " ".join(path.read_text().split()) for path in (ROOT / "README.md", ROOT / "docs" / "getting-started.md")
    }
    fallback = [
        str(path.relative_to(ROOT))
        for path, text in words.items()
        if "unreachable" not in text and "cannot be reached" not in text
    ]
    assert not fallback, f"{fallback} do not say what setup.sh does where PyTorch's CPU index cannot be reached"


def test_elastic_capacity_says_what_a_sigterm_does_with_the_default_options():
    from jobs.training import train

    parser = train.build_parser()
    (save,) = [action for action in parser._actions if "--save-on-sigterm" in action.option_strings]
    assert save.default is True
    text = page("elastic-capacity.md")
    assert "nothing is saved on SIGTERM" not in text and "last epoch's checkpoint each time" not in text
    first_section = text[text.index("## A node drained or lost") : text.index("## A preemption, step by step")]
    assert "rank 0 saves a checkpoint" in first_section


def test_the_local_page_names_the_run_directory_local_writes():
    from infra.cli import local

    (train,) = [command for command in local.steps(False, None, run_id="run-<n>") if "jobs.training.train" in command]
    run_dir = train[train.index("--run-dir") + 1]
    assert run_dir == "runs/synthetic/run-<n>"
    text = page("commands/local.md")
    assert "`runs/<data>/run-<n>/`" in text and "runs/<data>/model.pt" not in text and "trains nothing" not in text


def test_the_readme_names_karpenter_and_why_dev_asks_quota_for_more_nodes_than_workers():
    dev = yaml.safe_load((ROOT / "stacks" / "Pulumi.dev.yaml").read_text())["config"]
    nodes, workers = dev["elastic-training:nodeMaxCount"], dev["elastic-training:workers"]
    assert nodes > workers
    readme = (ROOT / "README.md").read_text()
    assert "Karpenter" in readme
    assert f"Why `dev` asks quota for {nodes} nodes while it runs {workers} workers" in readme
