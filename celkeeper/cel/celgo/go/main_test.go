package main

import (
	"testing"

	"celkeeper.local/celgo/engine"
)

// The template init compiles to build the compiler's environments must compile: a part that did not
// would still build its environment, but would hide a mistake here.
func TestWarmTemplateCompilesEveryPart(t *testing.T) {
	compiled, err := engine.CompileTemplate(warmTemplate)
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	if len(compiled.Diagnostics) > 0 {
		t.Fatalf("does not compile: %+v", compiled.Diagnostics)
	}
}
