package k8scel

import "celkeeper.local/native/gcpercent"

// GCPercent is the library's GOGC (gcpercent.GCPercent, set as the library loads, before the packages
// it imports initialise).
const GCPercent = gcpercent.GCPercent

// SetGCPercent sets GCPercent unless the environment sets GOGC (the Go benchmarks, so that their
// figures are the library's; the library sets it as it loads: package gcpercent).
func SetGCPercent() { gcpercent.Set() }
