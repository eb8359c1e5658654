//go:build tools

// Package tools pins Gatekeeper so that `go build github.com/open-policy-agent/gatekeeper/v3` (its
// manager: the validating webhook, the audit, the controllers) resolves from this module. Nothing here
// is compiled into celkeeper.
package tools

import (
	_ "github.com/open-policy-agent/gatekeeper/v3"
)
