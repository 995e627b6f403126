package conformance

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/contract/wire"
)

// File is a file a test's Ignition config writes, to find in the guest's reports.
type File struct {
	Path    string
	Content []byte
}

// FindPhase returns the first report of phase that is not a start: its result.
func FindPhase(msgs []wire.Message, phase string) (wire.Message, bool) {
	for _, m := range msgs {
		if m.Phase == phase && m.Status != wire.StatusStart {
			return m, true
		}
	}
	return wire.Message{}, false
}

// CheckReports asserts what the conformance OS reports of a boot: its reports in order,
// the karg on /proc/cmdline (reported with the first phase of a boot: live-booted,
// rebooted-from-disk or mount-root), and every file Ignition wrote with the expected
// content, as the result phase (ignition-applied on a live boot, ignition-firstboot on the
// first boot from disk) describes it.
func CheckReports(t *testing.T, msgs []wire.Message, resultPhase, karg string, files ...File) {
	t.Helper()
	for i, m := range msgs {
		if i > 0 && m.Boot == msgs[i-1].Boot && m.Seq != msgs[i-1].Seq+1 {
			t.Errorf("message %d (%s) has seq %d after %d", i, m.Phase, m.Seq, msgs[i-1].Seq)
		}
	}
	if len(msgs) == 0 {
		t.Fatal("no reports")
	}
	if first := msgs[0]; karg != "" && !strings.Contains(" "+strings.TrimSpace(first.Details["cmdline"])+" ", " "+karg+" ") {
		t.Errorf("kernel argument %q not in the guest's /proc/cmdline %q (reported by %s)", karg, first.Details["cmdline"], first.Phase)
	}
	for _, phase := range []string{"ignition-fetch-offline", "ignition-files"} {
		var ok bool
		for _, m := range msgs {
			ok = ok || (m.Phase == phase && m.Status == wire.StatusOK)
		}
		if !ok {
			t.Errorf("no successful %s report", phase)
		}
	}
	res, ok := FindPhase(msgs, resultPhase)
	if !ok {
		t.Fatalf("no %s report", resultPhase)
	}
	for _, f := range files {
		key := "file:" + f.Path
		sum := sha256.Sum256(f.Content)
		if got := res.Details[key+".sha256"]; got != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: guest reports sha256 %q (error %q), want %x", f.Path, got, res.Details[key+".error"], sum)
		}
		if len(f.Content) <= wire.MaxDetailFileBytes && res.Details[key] != string(f.Content) {
			t.Errorf("%s: guest reports content %q, want %q", f.Path, res.Details[key], f.Content)
		}
	}
}
