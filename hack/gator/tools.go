//go:build tools

// Package tools pins Gatekeeper so that `go build github.com/open-policy-agent/gatekeeper/v3/cmd/gator`
// resolves from this module. Nothing here is compiled into celkeeper.
package tools

import (
	_ "github.com/open-policy-agent/gatekeeper/v3/cmd/gator"
)
