"""Pure builders of Kubernetes objects in wire form (camelCase dicts): no Pulumi, no I/O
except reading the manifests we own. Tests call them directly and compare with golden files."""
