"""The model of the Pulumi CLI's checks (pulumi_cli_model.py) against the CLI's own test cases.

Each case and its expected message is taken from pulumi/pulumi at PULUMI_COMMIT:
sdk/go/common/workspace/project_test.go (ValidateProject, Project.Validate) and
pkg/workspace/config_project_test.go (stack values against the project's types). If the model
drifts from the CLI's behaviour on its own examples, these fail.
"""

from __future__ import annotations

import json

import pytest

from pulumi_cli_model import (
    load_yaml,
    stack_values,
    validate_config_value,
    validate_project,
    validate_stack,
    value_from_command_line,
    value_from_config_set_path,
    value_from_stack_file,
)


@pytest.mark.parametrize(
    "project, expected",
    [
        # TestProjectLoadJSON / TestProjectLoadJSONInformativeErrors
        ({"name": ""}, ["project is missing a non-empty string 'name' attribute"]),
        ({"Name": "project", "runtime": "test"}, ["project is missing a 'name' attribute; found 'Name' instead"]),
        (
            {"name": "project", "runtime": 4},
            [
                "#/runtime: oneOf failed",
                "#/runtime: expected string, but got number",
                "#/runtime: expected object, but got number",
            ],
        ),
        (
            {"name": "project", "runtime": "test", "backend": 4, "main": {}},
            ["#/main: expected string or null, but got object", "#/backend: expected object or null, but got number"],
        ),
        (
            {"name": "project", "runtime": "test", "template": {"displatName": "foo"}},
            ["#/template: additionalProperties 'displatName' not allowed; did you mean 'displayName'?"],
        ),
        (
            {"name": "project", "runtime": "test", "template": {"displayNameDisplayName": "foo"}},
            [
                "#/template: additionalProperties 'displayNameDisplayName' not allowed; the allowed attributes are "
                "'config', 'description', 'displayName', 'important', 'metadata' and 'quickstart'"
            ],
        ),
        (
            {"name": "project", "runtime": "test", "backend": {"url": "https://pulumi.com", "name": "test"}},
            ["#/backend: additionalProperties 'name' not allowed; the only allowed attribute is 'url'"],
        ),
        ({"name": "project", "runtime": "test", "description": None, "main": None, "backend": None}, []),
        # TestProjectValidationFailsForIncorrectDefaultValueType / ...SucceedsForCorrectDefaultValueType
        (
            {"name": "test", "runtime": "dotnet", "config": {"instanceSize": {"type": "integer", "default": "hello"}}},
            ["The default value specified for configuration key 'instanceSize' is not of the expected type 'integer'"],
        ),
        (
            {
                "name": "test",
                "runtime": "dotnet",
                "config": {
                    "values": {
                        "type": "array",
                        "items": {"type": "array", "items": {"type": "string"}},
                        "default": ["hello"],
                    }
                },
            },
            [
                "The default value specified for configuration key 'values' is not of the expected type 'array<array<string>>'"
            ],
        ),
        ({"name": "test", "runtime": "dotnet", "config": {"instanceSize": {"type": "integer", "default": 1}}}, []),
        (
            {
                "name": "test",
                "runtime": "dotnet",
                "config": {"example": {"type": "object", "default": {"hello": "world"}}},
            },
            [],
        ),
        # the 'items' check (project.go Project.Validate; project_test.go line ~600)
        (
            {"name": "test", "runtime": "dotnet", "config": {"instanceSize": {"type": "array"}}},
            [
                "The configuration key 'instanceSize' declares an array but does not specify the underlying type via the "
                "'items' attribute"
            ],
        ),
    ],
)
def test_project_checks_match_the_cli_tests(project, expected):
    errors = validate_project(project)
    assert sorted(errors) == sorted(expected) if expected else errors == []


PROJECT_WITH_TYPES = """
name: test
runtime: dotnet
config:
  values:
    type: array
    items:
      type: string
    default: [value]
  importantNumber:
    type: integer
    default: 1
"""


@pytest.mark.parametrize(
    "stack_yaml, expected",
    [
        # TestStackConfigErrorsWhenStackValueIsNotCorrectlyTyped, TestStackConfigIntegerTypeIsCorrectlyValidated
        (
            "config:\n  test:values: someValue\n",
            ["Stack 'dev' with configuration key 'values' must be of type 'array<string>'"],
        ),
        ("config:\n  test:importantNumber: 20\n", []),
        (
            "config:\n  test:importantNumber: hello\n",
            ["Stack 'dev' with configuration key 'importantNumber' must be of type 'integer'"],
        ),
        ("config:\n  test:values: [a, b]\n", []),
        ("config:\n  values: [a, b]\n", []),  # loaders.go: a bare key is the project's
    ],
)
def test_stack_checks_match_the_cli_tests(stack_yaml, expected):
    project = load_yaml(PROJECT_WITH_TYPES)
    assert validate_stack(project, "dev", stack_values("test", load_yaml(stack_yaml))) == expected


def test_a_key_without_default_missing_from_the_stack():
    # TestStackConfigErrorsWhenMissingStackValueForConfigTypeWithNoDefault
    project = load_yaml(
        "name: test\nruntime: dotnet\nconfig:\n  values:\n    type: array\n    items:\n      type: string\n"
    )
    assert validate_stack(project, "dev", {}) == ["Stack 'dev' is missing configuration value 'values'"]


@pytest.mark.parametrize(
    "text, go_value",
    [
        # gopkg.in/yaml.v3 resolve.go: only these words are booleans; 0x/0o/0 prefixes are integers;
        # a float needs digits (1e3 is one, unlike in YAML 1.1); dates are not strings
        ("true", True),
        ("False", False),
        ("yes", "yes"),
        ("on", "on"),
        ("2", 2),
        ("0.3", 0.3),
        ("'0.3'", "0.3"),
        ("0x10", 16),
        ("0o17", 15),
        ("010", 8),
        ("1_000", 1000),
        ("1e3", 1000.0),
        (".5", 0.5),
        ("~", None),
        ("[1, a]", [1, "a"]),
    ],
)
def test_yaml_scalars_as_yaml_v3_types_them(text, go_value):
    assert load_yaml(f"v: {text}\n")["v"] == go_value


@pytest.mark.parametrize(
    "go_value, text, is_object",
    [
        # object.go MarshalString: numbers and bools as JSON text, lists as JSON objects
        (0.3, "0.3", False),
        (2, "2", False),
        (2.0, "2", False),
        (1e21, "1e+21", False),
        (1e-7, "1e-7", False),
        (True, "true", False),
        ("0.3", "0.3", False),
        (["a"], '["a"]', True),
        (None, "", False),
    ],
)
def test_stack_file_values_become_config_values(go_value, text, is_object):
    value = value_from_stack_file(go_value)
    assert (value.text, value.object) == (text, is_object)


def test_how_the_types_judge_a_value():
    """ValidateConfigValue on what validateStackConfigValue hands it: plain values are text."""
    assert validate_config_value("string", None, value_from_stack_file(0.3).content())  # 0.3 is the text "0.3"
    assert not validate_config_value("integer", None, value_from_stack_file(0.3).content())  # Atoi("0.3") fails
    assert validate_config_value("integer", None, value_from_stack_file(2).content())
    assert validate_config_value("boolean", None, value_from_stack_file(True).content())
    assert not validate_config_value("boolean", None, value_from_command_line("True").content())
    assert not validate_config_value("number", None, "0.3")  # no such type: it falls to the array check
    strings = {"type": "string"}
    assert not validate_config_value("array", strings, value_from_command_line(json.dumps(["a"])).content())
    assert validate_config_value("array", strings, value_from_config_set_path(["203.0.113.0/24"]).content())
    assert not validate_config_value("array", strings, value_from_config_set_path(["1"]).content())  # coerced to 1
