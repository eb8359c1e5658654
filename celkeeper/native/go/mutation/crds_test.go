package mutation

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The embedded CRDs are Gatekeeper's, byte for byte (the module this one requires).
func TestCRDsAreGatekeepers(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/open-policy-agent/gatekeeper/v3").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "manifest_staging", "charts", "gatekeeper")
	for kind, name := range crdFileNames {
		ours, err := crdFiles.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ours, theirs) {
			t.Errorf("%s: %s differs from Gatekeeper's", kind, name)
		}
	}
	versions, err := loadCRDs()
	if err != nil {
		t.Fatal(err)
	}
	if len(versions["Assign"]) != 3 || len(versions["AssignImage"]) != 1 {
		t.Fatalf("served versions: %v", versions)
	}
}
