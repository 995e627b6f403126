// Package drift holds the machine-config daemon drift check: no step of the seal or of the
// site's reconfiguration may write, remove or leave different a file or unit a MachineConfig
// owns, because the MCD compares every file and unit of its current config with the disk
// (machine-config-operator pkg/daemon/on_disk_validation.go validateOnDiskState) and
// degrades the MachineConfigPool on a mismatch.
//
// The MachineConfigs are render's and the installer's (read from the config.ign that
// `snofactory render` writes for testdata/sno.yaml with the recorded openshift-install
// stand-in) and the MCO's own templates for a single-node master (testdata/mco-templates.txt,
// recorded from a pinned machine-config-operator commit; testdata/README.md says how). The
// steps and the paths they change are the plans `snofactory agent seal --dry-run` and
// `snofactory agent reconfigure --dry-run` print as JSON. A finding the MCD never sees is
// allowed only by an exception that cites the upstream reason and whose condition on the
// plans still holds (exceptions_test.go).
package drift
