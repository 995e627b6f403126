package agent

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/snofactory/snofactory/pipeline/strictjson"
	"github.com/snofactory/snofactory/seeds/node/steps"
)

// rpmOstreeStatus is as much of `rpm-ostree status --json` as the seal reads: the
// deployments in bootloader order (lifecycle-agent lca-cli/ostreeclient/rpmostreeclient.go
// Status, Deployment).
type rpmOstreeStatus struct {
	Deployments []struct {
		ID       string `json:"id"`
		OSName   string `json:"osname"`
		Checksum string `json:"checksum"`
		Serial   int    `json:"serial"`
		Booted   bool   `json:"booted"`
		Staged   bool   `json:"staged"`
	} `json:"deployments"`
}

// rollbackAction removes every ostree deployment but the booted one. The first boot's
// deployment (the boot image, which the MCD's first boot rebased from) keeps its own /etc,
// written by Ignition from the machine-config server's first config: the build's pull
// secret in /etc/mcs-machine-config-content.json among it (machine-config-operator
// pkg/server/server.go appendInitialMachineConfig). lifecycle-agent's seed never carries
// it: it archives the booted deployment's /etc only (seedcreator.go backupEtc, `ostree admin
// config-diff`) and image-based install deploys that one alone, undeploying the one
// coreos-installer wrote (lca-cli/ibi-preparation/ibipreparation.go cleanupRhcosSysroot).
// This seed is the whole disk, so the seal undeploys the others itself, highest index first
// because undeploy shifts the indexes (controllers/idle_handlers.go
// CleanupUnbootedStateroots; `ostree admin undeploy INDEX`, internal/ostreeclient
// ostreeclient.go Undeploy).
func (s Sealer) rollbackAction() sealAction {
	status := []string{"rpm-ostree", "status", "--json"}
	return sealAction{steps.Step{Name: "rollback-deployment", Argv: status,
		Changes: []string{"/ostree/deploy/*/deploy/*", "/boot/loader/entries/"},
		Detail:  "then ostree admin undeploy INDEX for every deployment but the booted one, highest first: the first boot's /etc holds the build's pull secret"},
		func(ctx context.Context) (string, error) {
			out, err := s.Run(ctx, status[0], status[1:]...)
			if err != nil {
				return "", fmt.Errorf("reading the ostree deployments: %w", err)
			}
			var st rpmOstreeStatus
			if err := strictjson.DecodeOpen(out, &st); err != nil {
				return "", fmt.Errorf("reading rpm-ostree status --json: %w", err)
			}
			idx, err := unbootedDeployments(st)
			if err != nil {
				return "", err
			}
			for _, i := range idx {
				if _, err := s.Run(ctx, "ostree", "admin", "undeploy", strconv.Itoa(i)); err != nil {
					return "", fmt.Errorf("undeploying ostree deployment %d: %w", i, err)
				}
			}
			if len(idx) == 0 {
				return "none: only the booted deployment", nil
			}
			return fmt.Sprintf("%d undeployed, only the booted one remains", len(idx)), nil
		}}
}

// unbootedDeployments are the indexes to undeploy, highest first. A staged deployment is an
// OS update waiting for its reboot: the seal refuses it rather than ship a half-applied one.
func unbootedDeployments(st rpmOstreeStatus) ([]int, error) {
	var idx, booted []int
	for i, d := range st.Deployments {
		switch {
		case d.Staged:
			return nil, fmt.Errorf("ostree deployment %s is staged (an OS update waits for a reboot): let the machine-config daemon finish its update, then seal again", d.ID)
		case d.Booted:
			booted = append(booted, i)
		default:
			idx = append([]int{i}, idx...)
		}
	}
	if len(booted) != 1 {
		return nil, errors.New("rpm-ostree lists no booted deployment: the seal runs on the booted node")
	}
	return idx, nil
}
