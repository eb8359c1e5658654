//go:build tools

// Package tools pins containerd 2.x so that `go build github.com/containerd/containerd/v2/cmd/containerd`
// (and the runc shim and ctr) resolves from this module. Nothing here is compiled into celkeeper.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
