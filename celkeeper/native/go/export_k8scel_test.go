package main

import (
	"testing"

	"celkeeper.local/native/k8scel"
)

// The template init compiles to build the compiler's environments must compile: a part that did not
// would still build its environment, but would hide a mistake here.
func TestWarmTemplateCompilesEveryPart(t *testing.T) {
	compiled, err := k8scel.CompileTemplate(warmTemplate)
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	if len(compiled.Diagnostics) > 0 {
		t.Fatalf("does not compile: %+v", compiled.Diagnostics)
	}
}
