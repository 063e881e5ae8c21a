"""The Pulumi CLI's own checks of Pulumi.yaml, the stack files and `-c`, as a Python model.

No Pulumi CLI runs here, so this module re-states, in our own code, what the CLI does before it runs
a program. Every rule was read in pulumi/pulumi at PULUMI_COMMIT (master of 2026-08-21, version
3.260.0-dev, after the v3.259.0 tag: the newest source we could read; our workflows pin the CLI at
3.272.0); each function names the file it models. Messages are the CLI's, so a test can assert
that the model refuses a file with the words the CLI would print.

  sdk/go/common/workspace/loaders.go   LoadProjectBytes: ValidateProject (the JSON schema), then the
                                       shorthand rewrite, then Project.Validate; LoadProjectStackBytes:
                                       bare stack keys are put in the project's namespace
  sdk/go/common/workspace/project.json the project schema (applied with santhosh-tekuri/jsonschema
                                       v5.0.0, sdk/go.mod); its messages come from that library's
                                       schema.go/compiler.go at tag v5.0.0
  sdk/go/common/workspace/project.go   ValidateProject, Project.Validate, ValidateConfigValue
  pkg/workspace/config.go              mergeConfig (missing keys), validateStackConfigValue
  sdk/go/common/resource/config/*.go   how a stack-file value becomes a config.Value (object.go
                                       unmarshalObject/MarshalString) and how `-c`/`config set` store one
  pkg/cmd/pulumi/config/config.go,     `pulumi config set KEY VALUE` stores a plain string;
  pkg/cmd/pulumi/operations/io.go,     `--path 'k[0]' v` builds a list; `up/preview -c KEY=VALUE`
  pkg/cmd/pulumi/project/newcmd/config.go   stores config.NewValue(VALUE), a plain string
  gopkg.in/yaml.v3 v3.0.1 resolve.go   how a plain YAML scalar is typed (go-yaml/yaml, commit 0d383ff9)
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import yaml

PULUMI_COMMIT = "1b5949891b3cefcb9974752b24a5ecef0acc86c8"


class NotModelled(ValueError):
    """Input this model does not cover; raised instead of guessing what the CLI would do."""


# --- YAML as gopkg.in/yaml.v3 decodes it into `any` (resolve.go) ------------------------------

_PLAIN = "plain scalar"  # a resolver tag of our own: an untagged, unquoted scalar


class _MarkPlainLoader(yaml.BaseLoader):
    """Composes nodes without PyYAML's YAML 1.1 typing, marking plain scalars for _go_scalar."""

    def resolve(self, kind, value, implicit):
        if kind is yaml.ScalarNode and implicit[0]:
            return _PLAIN
        return super().resolve(kind, value, implicit)


class GoUint64(int):
    """A YAML integer above int64: yaml.v3 gives a uint64, which is not Go's `int`."""


_INT64 = (-(2**63), 2**63 - 1)
# resolve.go: yamlStyleFloat
_YAML_STYLE_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
# resolve.go: only strings starting with a digit or a sign are tried as numbers and timestamps,
# strings starting with '.' as floats, and these exact words as bool/null/special floats.
_WORDS = {
    **{w: True for w in ("true", "True", "TRUE")},
    **{w: False for w in ("false", "False", "FALSE")},
    **{w: None for w in ("", "~", "null", "Null", "NULL")},
    **{w: math.nan for w in (".nan", ".NaN", ".NAN")},
    **{w: math.inf for w in (".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF")},
    **{w: -math.inf for w in ("-.inf", "-.Inf", "-.INF")},
}
_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt ].*)?")


def _go_parse_int(text: str) -> int | None:
    """strconv.ParseInt(text, 0, 64), then ParseUint: base prefixes 0x/0o/0b and a leading 0 (octal)."""
    match = re.fullmatch(r"([+-]?)(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)", text)
    if not match:
        return None
    sign, digits = match.groups()
    if re.fullmatch(r"0[0-7]+", digits):
        value = int(digits[1:], 8)
    else:
        value = int(digits, 0)
    value = -value if sign == "-" else value
    if _INT64[0] <= value <= _INT64[1]:
        return value
    if not sign and value < 2**64:
        return GoUint64(value)
    return None


def _go_scalar(text: str) -> Any:
    if text in _WORDS:
        return _WORDS[text]
    if text[:1] == ".":
        return float(text) if _YAML_STYLE_FLOAT.fullmatch(text) else text
    if text[:1] not in tuple("+-0123456789"):
        return text
    if _TIMESTAMP.fullmatch(text):
        # a time.Time; the config value's text is then time.Time.String(), judged as a string either way
        raise NotModelled(f"YAML timestamp {text!r}")
    plain = text.replace("_", "")
    as_int = _go_parse_int(plain)
    if as_int is not None:
        return as_int
    if _YAML_STYLE_FLOAT.fullmatch(plain):
        return float(plain)
    return text


def _go_value(node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        result = {}
        for key_node, value_node in node.value:
            key = _go_value(key_node)
            if not isinstance(key, str):  # project.go SimplifyMarshalledValue
                raise ValueError(f"expected only string keys, got '{key}'")
            result[key] = _go_value(value_node)
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_go_value(item) for item in node.value]
    if node.tag == _PLAIN:
        return _go_scalar(node.value)
    if node.tag == "tag:yaml.org,2002:str":
        return node.value
    raise NotModelled(f"explicit YAML tag {node.tag}")


def load_yaml(text: str) -> Any:
    """The document as yaml.v3 decodes it into Go's `any` (int, float64, bool, string, nil, lists, maps)."""
    node = yaml.compose(text, Loader=_MarkPlainLoader)
    return None if node is None else _go_value(node)


# --- the project schema (project.json) and ValidateProject (project.go) ----------------------


def _json_type(value: Any) -> str:
    """santhosh-tekuri/jsonschema v5.0.0 schema.go jsonType."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, GoUint64):
        raise NotModelled("uint64 makes jsonschema v5 panic")
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}[type(value)]


def _is_type(value: Any, json_type: str) -> bool:
    actual = _json_type(value)
    if json_type == "integer":  # schema.go: a number whose decimal form is a whole number
        return actual == "number" and (isinstance(value, int) or (math.isfinite(value) and value.is_integer()))
    return actual == json_type


def _type_error(path: str, value: Any, *types: str) -> list[str]:
    if any(_is_type(value, t) for t in types):
        return []
    return [f"#{path}: expected {' or '.join(types)}, but got {_json_type(value)}"]


def _not_allowed(path: str, value: dict, allowed: tuple[str, ...]) -> list[str]:
    """additionalProperties: false (v5 message; project.go ValidateProject adds the hint)."""
    extra = [k for k in value if k not in allowed]
    if not extra:
        return []
    message = f"additionalProperties {', '.join(repr(k) for k in extra)} not allowed"
    if len(extra) == 1:
        close = _closest(extra[0], allowed)
        if close:
            message += f"; did you mean '{close}'?"
        elif len(allowed) > 1:
            quoted = sorted(f"'{k}'" for k in allowed)
            message += f"; the allowed attributes are {', '.join(quoted[:-1])} and {quoted[-1]}"
        else:
            message += f"; the only allowed attribute is '{allowed[0]}'"
    return [f"#{path}: {message}"]


def _closest(needle: str, keys) -> str:
    """project.go findClosestKey: the key at the smallest case-insensitive Levenshtein distance, at
    most 2, the first alphabetically on a tie; "" when none is that close."""
    scored = sorted((_levenshtein(needle.lower(), k.lower()), k) for k in keys)
    return scored[0][1] if scored and scored[0][0] <= 2 else ""


def _levenshtein(a: str, b: str) -> int:
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (ca != cb))
    return row[-1]


# project.json $defs/simpleConfigType: the only config types; there is no number or float.
CONFIG_TYPES = ("string", "integer", "boolean", "array", "object")
# project.json $defs/configTypeDeclaration: the keys a typed config declaration may have.
DECLARATION_KEYS = ("type", "items", "description", "secret", "default", "value")
# project.json properties + project.go Project struct: every top-level key the CLI reads. The schema
# allows other keys (additionalProperties: true) and the CLI ignores them, so a misspelt key is silent.
PROJECT_KEYS = (
    "name",
    "description",
    "author",
    "website",
    "license",
    "runtime",
    "main",
    "config",
    "stackConfigDir",
    "backend",
    "options",
    "template",
    "packages",
    "plugins",
    "requiredPulumiVersion",
)
_NULLABLE_STRINGS = ("description", "author", "website", "license", "main", "stackConfigDir")


def _simple_type_errors(path: str, value: Any) -> list[str]:
    if value in CONFIG_TYPES and isinstance(value, str):
        return []
    choices = ", ".join(f'"{t}"' for t in CONFIG_TYPES)
    return [f"#{path}: doesn't validate with '/$defs/simpleConfigType'", f"#{path}: value must be one of {choices}"]


def _items_errors(path: str, items: Any) -> list[str]:
    """project.json $defs/configItemsType: an object with `type`, and `items` when type is array."""
    if not isinstance(items, dict):
        return _type_error(path, items, "object")
    errors = []
    if "type" not in items:
        errors.append(f'#{path}: missing properties: "type"')
    elif isinstance(items["type"], dict):
        errors += _items_errors(f"{path}/type", items["type"])
    else:
        errors += _simple_type_errors(f"{path}/type", items["type"])
    if "items" in items:
        errors += _items_errors(f"{path}/items", items["items"])
    if items.get("type") == "array" and "items" not in items:
        errors += [f"#{path}: if-then failed", f'#{path}: missing properties: "items"']
    return errors


def _declaration_errors(path: str, declaration: dict) -> list[str]:
    """project.json $defs/configTypeDeclaration."""
    errors = _not_allowed(path, declaration, DECLARATION_KEYS)
    if "type" in declaration:
        errors += _simple_type_errors(f"{path}/type", declaration["type"])
    if "items" in declaration:
        errors += _items_errors(f"{path}/items", declaration["items"])
    if "description" in declaration:
        errors += _type_error(f"{path}/description", declaration["description"], "string")
    if "secret" in declaration:
        errors += _type_error(f"{path}/secret", declaration["secret"], "boolean")
    return errors


def _config_entry_errors(path: str, entry: Any) -> list[str]:
    """project.json config.additionalProperties: oneOf string, integer, boolean, array, declaration."""
    shorthand = [t for t in ("string", "integer", "boolean", "array") if _is_type(entry, t)]
    declaration = _declaration_errors(path, entry) if isinstance(entry, dict) else None
    if shorthand or declaration == []:
        return []
    causes = [f"#{path}: expected {t}, but got {_json_type(entry)}" for t in ("string", "integer", "boolean", "array")]
    causes.append(f"#{path}: doesn't validate with '/$defs/configTypeDeclaration'")
    causes += declaration if declaration is not None else [f"#{path}: expected object, but got {_json_type(entry)}"]
    return [f"#{path}: oneOf failed", *causes]


def _runtime_errors(runtime: Any) -> list[str]:
    if isinstance(runtime, str) and runtime:
        return []
    if isinstance(runtime, dict):
        causes = _not_allowed("/runtime", runtime, ("name", "options"))
        if "name" in runtime:
            causes += _type_error("/runtime/name", runtime["name"], "string")
            if runtime["name"] == "":
                causes.append("#/runtime/name: length must be >= 1, but got 0")
        if "options" in runtime:
            causes += _type_error("/runtime/options", runtime["options"], "object")
        if not causes:
            return []
        return ["#/runtime: oneOf failed", "#/runtime: expected string, but got object", *causes]
    causes = (
        ["#/runtime: length must be >= 1, but got 0"]
        if runtime == ""
        else [f"#/runtime: expected string, but got {_json_type(runtime)}"]
    )
    return ["#/runtime: oneOf failed", *causes, f"#/runtime: expected object, but got {_json_type(runtime)}"]


def schema_errors(project: dict) -> list[str]:
    """project.json as ValidateProject reports it: one '#/<path>: <message>' line per failure."""
    errors = []
    for key in _NULLABLE_STRINGS:
        if key in project:
            errors += _type_error(f"/{key}", project[key], "string", "null")
    if "runtime" in project:
        errors += _runtime_errors(project["runtime"])
    config = project.get("config")
    if "config" in project:
        errors += _type_error("/config", config, "object", "string", "null")
    if isinstance(config, dict):
        for key, entry in config.items():
            if key == "secret":  # project.json declares config.properties.secret: boolean
                errors += _type_error("/config/secret", entry, "boolean")
            else:
                errors += _config_entry_errors(f"/config/{key}", entry)
    backend = project.get("backend")
    if "backend" in project:
        errors += _type_error("/backend", backend, "object", "null")
    if isinstance(backend, dict):
        errors += _not_allowed("/backend", backend, ("url",))
        if "url" in backend:
            errors += _type_error("/backend/url", backend["url"], "string")
    options = project.get("options")
    if "options" in project:
        errors += _type_error("/options", options, "object", "null")
    if isinstance(options, dict):
        errors += _not_allowed("/options", options, ("refresh",))
        if "refresh" in options and options["refresh"] != "always":
            errors += _type_error("/options/refresh", options["refresh"], "string") or [
                '#/options/refresh: value must be "always"'
            ]
    if "template" in project:
        errors += _type_error("/template", project["template"], "object", "null")
        if isinstance(project["template"], dict):
            errors += _not_allowed(
                "/template",
                project["template"],
                ("displayName", "description", "quickstart", "important", "metadata", "config"),
            )
    for key in ("packages", "plugins"):
        if key in project:
            errors += _type_error(f"/{key}", project[key], "object")
    return errors


def validate_project(project: Any) -> list[str]:
    """LoadProjectBytes (loaders.go): ValidateProject, then Project.Validate. [] when the CLI accepts it.

    ValidateProject stops at the first manual check and reports every schema failure; Project.Validate
    returns its first error (Go map order; here in file order)."""
    if not isinstance(project, dict):
        return [f"expected project to be an object, was '{type(project).__name__}'"]
    if "name" not in project:
        close = _closest("name", project)
        return ["project is missing a 'name' attribute" + (f"; found '{close}' instead" if close else "")]
    if not isinstance(project["name"], str) or project["name"] == "":
        return ["project is missing a non-empty string 'name' attribute"]
    errors = schema_errors(project)
    if errors:
        return errors
    return _project_validate(project)


def _namespaced_by_project(project_name: str, key: str) -> bool:
    """project.go configKeyIsNamespacedByProject."""
    return ":" not in key or key.startswith(project_name + ":")


def declarations(project: dict) -> dict[str, dict]:
    """The config block after RewriteShorthandConfigValues (project.go): a bare value under a project
    key is a declaration with that default; under another namespace, a `value`."""
    result = {}
    for key, entry in (project.get("config") or {}).items():
        if isinstance(entry, dict):
            result[key] = entry
        else:
            result[key] = {"default" if _namespaced_by_project(project["name"], key) else "value": entry}
    return result


def full_type_name(type_name: str, items: dict | None) -> str:
    """project.go InferFullTypeName: array<string> for an array of strings."""
    if items is not None:
        return f"array<{full_type_name(items.get('type', ''), items.get('items'))}>"
    return type_name


def _project_validate(project: dict) -> list[str]:
    """project.go Project.Validate."""
    name = project["name"]
    for key, declaration in declarations(project).items():
        typed = declaration.get("type") is not None
        default, value = declaration.get("default"), declaration.get("value")
        if default is not None and value is not None:
            return [f"project config '{key}' cannot have both a 'default' and 'value' attribute"]
        if _namespaced_by_project(name, key):
            if typed and declaration["type"] == "array" and declaration.get("items") is None:
                return [
                    f"The configuration key '{key}' declares an array but does not specify the underlying "
                    "type via the 'items' attribute"
                ]
            if (
                typed
                and default is not None
                and not validate_config_value(declaration["type"], declaration.get("items"), default)
            ):
                return [
                    f"The default value specified for configuration key '{key}' is not of the expected type "
                    f"'{full_type_name(declaration['type'], declaration.get('items'))}'"
                ]
        else:
            if typed:
                return [f"Configuration key '{key}' is not namespaced by the project and should not define a type"]
            if default is not None:
                return [
                    f"Configuration key '{key}' is not namespaced by the project and should not define a default "
                    "value. Did you mean to use the 'value' attribute instead of 'default'?"
                ]
            if value is None:
                return [f"Configuration key '{key}' is namespaced and must provide an attribute 'value'"]
    return []


# --- values: ValidateConfigValue (project.go) -------------------------------------------------

_ATOI = re.compile(r"[+-]?[0-9]+")  # strconv.Atoi: base 10, optional sign, no underscores or spaces


def validate_config_value(type_name: str, items: dict | None, value: Any) -> bool:
    """project.go ValidateConfigValue, on a Go value (string, int, float64, bool, []any, map)."""
    if type_name == "string":
        return isinstance(value, str)
    if type_name == "integer":
        if isinstance(value, int) and not isinstance(value, (bool, GoUint64)):
            return True
        if isinstance(value, float):  # f == math.Trunc(f): true for whole numbers and ±Inf, false for NaN
            return math.isinf(value) or (value == value and value.is_integer())
        if isinstance(value, str):
            return bool(_ATOI.fullmatch(value)) and _INT64[0] <= int(value) <= _INT64[1]
        return False
    if type_name == "boolean":
        return value in ("true", "false") if isinstance(value, str) else isinstance(value, bool)
    if type_name == "object":
        return isinstance(value, dict)
    # every other name, `number` included, falls through to the array check
    if not isinstance(value, list) or items is None:
        return False
    return all(validate_config_value(items.get("type", ""), items.get("items"), item) for item in value)


# --- stack values: config.Value (sdk/go/common/resource/config) --------------------------------


@dataclass(frozen=True)
class StackValue:
    """config.Value: its text, and whether the text is JSON of a list/map (`object`) or a secret."""

    text: str
    object: bool = False
    secure: bool = False

    def content(self) -> Any:
        """What validateStackConfigValue (pkg/workspace/config.go) type-checks: the text, or for an
        object the text decoded with encoding/json into `any` (every number a float64)."""
        return json.loads(self.text, parse_int=float) if self.object else self.text


def _go_json_float(value: float) -> str:
    """encoding/json's float64: shortest digits, plain notation for 1e-6 <= |v| < 1e21, else exponent."""
    if not math.isfinite(value):
        raise ValueError(f"json: unsupported value: {value}")
    if value == 0 or 1e-6 <= abs(value) < 1e21:
        return format(Decimal(repr(value)).normalize(), "f")
    mantissa, exponent = repr(value).split("e")
    return f"{mantissa}e{exponent[0]}{int(exponent[1:])}"


def _go_json(value: Any) -> str:
    if isinstance(value, float):
        return _go_json_float(value)
    if isinstance(value, list):
        return "[" + ",".join(_go_json(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{_go_json(v)}" for k, v in sorted(value.items())) + "}"
    return json.dumps(value, ensure_ascii=False)


def value_from_stack_file(value: Any) -> StackValue:
    """A stack-file value (already decoded by load_yaml) as config.Value: object.go unmarshalObject,
    then MarshalString: scalars become their text (numbers and bools as JSON), lists and maps JSON
    objects, {secure: ciphertext} a secret; an empty value is "" (loaders.go checkForEmptyConfig)."""
    if value is None:
        return StackValue("")
    if isinstance(value, dict) and set(value) == {"secure"} and isinstance(value["secure"], str):
        return StackValue(value["secure"], secure=True)
    if isinstance(value, str):
        return StackValue(value)
    if isinstance(value, bool):
        return StackValue("true" if value else "false")
    if isinstance(value, (int, float)):
        return StackValue(_go_json(value))
    return StackValue(_go_json(value), object=True)


def value_from_command_line(text: str) -> StackValue:
    """`pulumi up/preview -c KEY=VALUE` (newcmd/config.go parseConfig: config.NewValue) and
    `pulumi config set KEY VALUE` (config.go: NewTypedValue(value, TypeUnknown)): a plain string."""
    return StackValue(text)


def value_from_config_set_path(index_values: list[str]) -> StackValue:
    """`pulumi config set --path 'KEY[0]' A`, `'KEY[1]' B`, ...: map.go Map.Set with a path builds a
    list; each element is coerced (object.go coerce): true/false, integers without a leading 0, else strings."""

    def coerce(text: str) -> Any:
        if text in ("true", "false"):
            return text == "true"
        if len(text) > 1 and text[0] == "0":
            return text
        return int(text) if re.fullmatch(r"[+-]?[0-9]+", text) else text

    return StackValue(_go_json([coerce(v) for v in index_values]), object=True)


def value_from_project(value: Any) -> StackValue:
    """pkg/workspace/config.go createConfigValue: a default or value from Pulumi.yaml put into the
    stack's config. string/int/bool: their text (fmt %v); anything else (floats too): a JSON object."""
    if isinstance(value, bool):
        return StackValue("true" if value else "false")
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, GoUint64)):
        return StackValue(str(value))
    return StackValue(_go_json(value), object=True)


def _listed(keys: list[str]) -> str:
    """pkg/workspace/config.go formatMissingKeys: 'a', 'b' and 'c'."""
    quoted = [f"'{k}'" for k in sorted(keys)]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def namespaced(project_name: str, key: str) -> str:
    """loaders.go stackConfigNamespacedWithProject / config io.go parseConfigKey: a bare key is the project's."""
    return key if ":" in key else f"{project_name}:{key}"


def stack_values(project_name: str, stack_document: Any) -> dict[str, StackValue]:
    """LoadProjectStackBytes: the stack file's `config` as full key -> config.Value."""
    config = (stack_document or {}).get("config") or {}
    return {namespaced(project_name, key): value_from_stack_file(value) for key, value in config.items()}


def validate_stack(project: dict, stack: str, values: dict[str, StackValue]) -> list[str]:
    """pkg/workspace/config.go mergeConfig with validate=true: first every project key with no
    default/value that the stack lacks (one error), then each typed key's value, in sorted key order,
    stopping at the first (validateStackConfigValues / validateStackConfigValue)."""
    name = project["name"]
    declared = declarations(project)
    missing = [
        key
        for key, decl in sorted(declared.items())
        if namespaced(name, key) not in values
        and decl.get("default") is None
        and decl.get("value") is None
        and namespaced(name, key).split(":", 1)[0] == name
    ]
    if missing:
        return [f"Stack '{stack}' is missing configuration value{'s' if len(missing) > 1 else ''} {_listed(missing)}"]
    for key, decl in sorted(declared.items()):
        value = values.get(namespaced(name, key))
        if value is None:  # mergeConfig put the project's default or value in its place
            value = value_from_project(decl["value"] if decl.get("value") is not None else decl["default"])
        if decl.get("secret") and not value.secure:
            return [f"Stack '{stack}' with configuration key '{key}' must be encrypted as it's secret"]
        if decl.get("type") is None or value.secure:
            continue  # untyped; a secret's plaintext cannot be read offline
        if not validate_config_value(decl["type"], decl.get("items"), value.content()):
            return [
                f"Stack '{stack}' with configuration key '{key}' must be of type "
                f"'{full_type_name(decl['type'], decl.get('items'))}'"
            ]
    return []
