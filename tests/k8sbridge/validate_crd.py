#!/usr/bin/python3
"""Validates JSON objects against a CustomResourceDefinition's openAPIV3Schema.

usage: validate_crd.py CRD.yaml OBJECT.json...   (prints one verdict per file)
The CRD schema becomes JSON Schema the way the apiserver reads it: `nullable`
adds a null type, and `additionalProperties: false` is added wherever
`properties` are listed without x-kubernetes-preserve-unknown-fields, so
unknown fields (which the apiserver silently prunes) are caught too.
"""
import json
import sys

import jsonschema
import yaml


def strict(node):
    if isinstance(node, dict):
        node = {k: strict(v) for k, v in node.items()}
        if node.pop("nullable", False) and "type" in node:
            node["type"] = [node["type"], "null"]
        if "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
            node.setdefault("additionalProperties", False)
        if node.get("x-kubernetes-int-or-string"):
            node.pop("type", None)
            node["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        return node
    if isinstance(node, list):
        return [strict(v) for v in node]
    return node


def main():
    with open(sys.argv[1]) as f:
        crd = yaml.safe_load(f)
    schema = strict(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    schema.setdefault("properties", {})["metadata"] = {"type": "object"}
    validator = jsonschema.Draft7Validator(schema)
    for path in sys.argv[2:]:
        with open(path) as f:
            obj = json.load(f)
        errors = sorted(validator.iter_errors(obj), key=lambda e: list(e.path))
        if errors:
            e = errors[0]
            print(f"INVALID {path}: {'.'.join(str(p) for p in e.path)}: {e.message[:200]}")
        else:
            print(f"VALID {path}")


if __name__ == "__main__":
    main()
