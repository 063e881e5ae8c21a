// The Pulumi Kubernetes provider's plugin binary, built by scripts/build-tools.sh.
//
// Upstream's own main (github.com/pulumi/pulumi-kubernetes provider/cmd/pulumi-resource-kubernetes/main.go)
// embeds schema-embed.json, a file `go generate` writes and git ignores, so the module zip the Go proxy
// serves cannot be built as it is. This file does what that main does: build-tools.sh runs upstream's
// generate.go over the schema.json and terraform-mapping.json of the same module version, and this
// program embeds the two files it writes and serves the provider.
package main

import (
	_ "embed"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed schema-embed.json
var pulumiSchema []byte

//go:embed terraform-mapping-embed.json
var terraformMapping []byte

func main() {
	provider.Serve("kubernetes", version.Version, pulumiSchema, terraformMapping)
}
