"""Item 6 of issue 14: the Kubernetes version's EKS support phase on the day `synth` / `pulumi up`
runs, and the EKS add-on versions.

EKS calendar (upstream-facts.md fact 16; EKS user guide "Understand the Kubernetes version
lifecycle on EKS", awsdocs/amazon-eks-user-guide latest/ug/versioning/kubernetes-versions.adoc
@ 8596db85): "Billing for extended support starts at the beginning of the day that the version
reaches end of standard support, in the UTC+0 timezone", and "On the end of extended support date,
you can no longer create new Amazon EKS clusters with the unsupported version". So the day before
the end of standard support is the last one at the standard price, the end date itself is the first
one in extended support, the day before the end of extended support is the last one a cluster can
be created, and the end date is refused. Prices: $0.10/hour standard, $0.60/hour extended (fact 16).

"Today" is injected everywhere (load_settings(today=...)), so nothing here depends on the date the
suite runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from datetime import date, timedelta
from functools import partial

import pytest

import infra.cli.synth
from infra import versions
from infra.config import PROJECT, ConfigError, load_settings
from infra.config.stack_file import read_stack_file
from synth_support import REPO

KEY = f"{PROJECT}:kubernetesVersion"
DAY = timedelta(days=1)
# fact 16, as written there
FACT_16 = {
    "1.31": ("2025-11-26", "2026-11-26"),
    "1.32": ("2026-03-23", "2027-03-23"),
    "1.33": ("2026-07-29", "2027-07-29"),
    "1.34": ("2026-12-02", "2027-12-02"),
    "1.35": ("2027-03-27", "2028-03-27"),
}


def settings_on(version: str, today: date):
    return load_settings(
        {"aws:region": "us-west-2", KEY: version, f"{PROJECT}:apiAllowedCidrs": '["203.0.113.0/24"]'},
        "test",
        today=today,
    )


def test_the_calendar_is_fact_16_for_every_allowed_version():
    assert set(versions.EKS_SUPPORT) == set(versions.SUPPORTED_KUBERNETES_VERSIONS)
    for version, (standard, extended) in FACT_16.items():
        support = versions.EKS_SUPPORT[version]
        assert (support.end_of_standard.isoformat(), support.end_of_extended.isoformat()) == (standard, extended)
    assert versions.DEFAULT_KUBERNETES_VERSION == "1.35"


@pytest.mark.parametrize("version", versions.SUPPORTED_KUBERNETES_VERSIONS)
def test_phases_at_the_boundary_days(version):
    support = versions.EKS_SUPPORT[version]
    last_standard, first_extended = support.end_of_standard - DAY, support.end_of_standard
    last_extended, day_after = support.end_of_extended - DAY, support.end_of_extended
    assert versions.eks_support_phase(version, last_standard) == versions.STANDARD
    assert versions.eks_support_phase(version, first_extended) == versions.EXTENDED
    assert versions.eks_support_phase(version, last_extended) == versions.EXTENDED
    assert versions.eks_support_phase(version, day_after) == versions.ENDED

    # The last days of standard support warn of the price to come (issue 39); a month before, nothing.
    (coming,) = settings_on(version, last_standard).warnings
    assert coming.startswith(
        f"config {KEY}={version!r} enters EKS extended support on {support.end_of_standard} (in 1 day)"
    )
    assert settings_on(version, support.end_of_standard - 31 * DAY).warnings == ()
    for day in (first_extended, last_extended):
        (warning,) = settings_on(version, day).warnings
        assert warning.startswith(
            f"config {KEY}={version!r} is in EKS extended support since {support.end_of_standard}"
        )
        assert "$0.60/hour instead of $0.10/hour" in warning
    with pytest.raises(ConfigError) as refused:
        settings_on(version, day_after)
    assert str(refused.value).startswith(
        f"config {KEY}={version!r} is invalid: EKS extended support for Kubernetes "
        f"{version} ended on {support.end_of_extended}"
    )
    assert "\n" not in str(refused.value)


def test_the_refusal_names_the_versions_still_usable():
    with pytest.raises(ConfigError) as refused:
        settings_on("1.31", date(2026, 11, 26))
    assert str(refused.value).endswith("must be one of 1.32, 1.33, 1.34, 1.35")


def test_synth_refuses_a_version_past_extended_support_with_one_line(tmp_path, capsys, monkeypatch):
    registered = []
    monkeypatch.setattr(infra.cli.synth, "load_settings", partial(load_settings, today=date(2026, 11, 26)))
    monkeypatch.setattr(infra.cli.synth, "run_program", lambda settings: registered.append(settings) or ([], {}))
    out = tmp_path / "out"
    assert infra.cli.synth.main(["dev", "--out", str(out), "-c", "kubernetesVersion=1.31"]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert line.startswith(
        f"error: config {KEY}='1.31' is invalid: EKS extended support for Kubernetes 1.31 ended on 2026-11-26"
    )
    assert registered == [] and not out.exists() and captured.out == ""


def test_synth_warns_in_extended_support(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(infra.cli.synth, "load_settings", partial(load_settings, today=date(2026, 12, 2)))
    monkeypatch.setattr(infra.cli.synth, "run_program", lambda settings: ([], {}))
    assert infra.cli.synth.main(["dev", "--out", str(tmp_path / "out"), "-c", "kubernetesVersion=1.34"]) == 0
    err = capsys.readouterr().err
    assert (
        f"warning: config {KEY}='1.34' is in EKS extended support since 2026-12-02: the control plane costs "
        "$0.60/hour instead of $0.10/hour" in err
    )


def run_program(config: dict[str, str], today: date) -> subprocess.CompletedProcess:
    """__main__.py as `pulumi up` runs it (runpy of the project root), under the recording mocks,
    with load_settings's today fixed; prints the invokes the program made as JSON."""
    script = textwrap.dedent(f"""
        import datetime, functools, json, runpy, pulumi
        import infra.config
        from infra.cli.mocks import RecordingMocks
        infra.config.load_settings = functools.partial(infra.config.load_settings, today=datetime.date.fromisoformat({today.isoformat()!r}))
        mocks = RecordingMocks("{PROJECT}", "dev", "us-west-2")
        mocks.install()
        pulumi.runtime.set_all_config({config!r})
        @pulumi.runtime.test
        def run():
            runpy.run_path(".", run_name="__main__")
        run()
        addons = {{r.name: r.inputs.get("addonVersion") for r in mocks.registrations if r.type == "aws:eks/addon:Addon"}}
        print("RESULT " + json.dumps({{"calls": mocks.calls, "addons": addons}}))
    """)
    return subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_pulumi_up_warns_in_extended_support_and_resolves_addons_for_the_stack_version():
    config = {**read_stack_file("dev"), KEY: "1.34"}
    result = run_program(config, today=date(2027, 1, 15))
    assert result.returncode == 0, result.stderr
    # pulumi.log.warn under the mocks is written as "warning: ..." (infra/cli/mocks.py)
    assert f"warning: config {KEY}='1.34' is in EKS extended support since 2026-12-02" in result.stderr
    found = json.loads(result.stdout.split("RESULT ", 1)[1])
    lookups = [args for token, args in found["calls"] if token == "aws:eks/getAddonVersion:getAddonVersion"]
    assert sorted(args["addonName"] for args in lookups) == sorted(versions.OFFLINE_ADDON_VERSIONS)
    assert all(args["kubernetesVersion"] == "1.34" and args["mostRecent"] is True for args in lookups)
    # the Addons carry exactly what the lookup answered (the mocks answer with the last-run versions)
    assert found["addons"] == {
        "storage-efs-csi-driver": versions.EFS_CSI_ADDON_VERSION,
        "addons-metrics-server": versions.METRICS_SERVER_ADDON_VERSION,
        "addons-coredns": versions.COREDNS_ADDON_VERSION,
    }
