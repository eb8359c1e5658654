//go:build tools

// Package tools pins Gatekeeper so that `go build github.com/open-policy-agent/gatekeeper/v3` (the
// manager: the module root's main package) resolves from this module. Nothing here is compiled into
// celkeeper.
package tools

import (
	_ "github.com/open-policy-agent/gatekeeper/v3"
)
