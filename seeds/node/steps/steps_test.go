package steps_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/node/steps"
)

var plan = []steps.Step{
	{Name: "network", Argv: []string{"nmstatectl", "apply", "/etc/x.yml"}, Changes: []string{"/etc/x.yml", "NetworkManager connections"}},
	{Name: "api", Detail: "wait for the <API>"},
}

func TestPrint(t *testing.T) {
	tests := []struct {
		name, format string
		plan         []steps.Step
		want         string
		err          string
	}{
		{"text", "text", plan, " 1. network\n      run:     nmstatectl apply /etc/x.yml\n      changes: /etc/x.yml\n      changes: NetworkManager connections\n 2. api: wait for the <API>\n", ""},
		{"default is text", "", plan[1:], " 1. api: wait for the <API>\n", ""},
		{"empty text", "text", nil, "", ""},
		{"empty json is a list", "json", nil, "[]\n", ""},
		{"unknown format", "yaml", plan, "", `output format "yaml"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			err := steps.Print(&b, tt.plan, tt.format)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want ...%s...", err, tt.err)
				}
				return
			}
			if err != nil || b.String() != tt.want {
				t.Fatalf("Print = %q, %v; want %q", b.String(), err, tt.want)
			}
		})
	}
}

func TestPrintJSONRoundTrip(t *testing.T) {
	var b bytes.Buffer
	if err := steps.Print(&b, plan, "json"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "<API>") {
		t.Errorf("HTML escaped: %s", b.String())
	}
	var back []steps.Step
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, plan) {
		t.Errorf("round trip = %+v, want %+v", back, plan)
	}
	if strings.Contains(b.String(), `"argv": null`) || strings.Count(b.String(), `"argv"`) != 1 {
		t.Errorf("empty fields not omitted: %s", b.String())
	}
}

func TestNames(t *testing.T) {
	if got := steps.Names(plan); !reflect.DeepEqual(got, []string{"network", "api"}) {
		t.Errorf("Names = %v", got)
	}
	if got := steps.Names(nil); len(got) != 0 {
		t.Errorf("Names(nil) = %v", got)
	}
}

func TestExecRunner(t *testing.T) {
	tests := []struct {
		name     string
		argv     []string
		out      string
		exitCode int      // -1: no error
		says     []string // in the error
		notSays  []string
	}{
		{"stdout only", []string{"sh", "-c", "echo out; echo warn >&2"}, "out\n", -1, nil, nil},
		{"failure keeps stderr out of the output", []string{"sh", "-c", "echo partial; echo why >&2; exit 3"}, "partial\n", 3, []string{"sh -c", "exit status 3", ": why"}, nil},
		{"long stderr keeps its tail", []string{"sh", "-c", "head -c 600 /dev/zero | tr '\\0' x >&2; printf END >&2; exit 1"}, "", 1, []string{"...x", "END"}, []string{strings.Repeat("x", 600)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := steps.ExecRunner(context.Background(), tt.argv[0], tt.argv[1:]...)
			if string(out) != tt.out {
				t.Errorf("output = %q, want %q", out, tt.out)
			}
			if tt.exitCode < 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ce *steps.CommandError
			if !errors.As(err, &ce) || !reflect.DeepEqual(ce.Argv, tt.argv) {
				t.Fatalf("err = %v, want a CommandError for %v", err, tt.argv)
			}
			var ec interface{ ExitCode() int }
			if !errors.As(err, &ec) || ec.ExitCode() != tt.exitCode {
				t.Errorf("exit code of %v, want %d", err, tt.exitCode)
			}
			for _, s := range tt.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
			for _, s := range tt.notSays {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error quotes all of stderr")
				}
			}
		})
	}
	if _, err := steps.ExecRunner(context.Background(), "/nonexistent/command"); err == nil || !strings.Contains(err.Error(), "/nonexistent/command") {
		t.Errorf("missing command: %v", err)
	}
}

func TestCovers(t *testing.T) {
	for _, tc := range []struct {
		changed, p string
		want       bool
	}{
		{"/var/lib/kubelet/config.json", "/var/lib/kubelet/config.json", true},
		{"/var/lib/kubelet", "/var/lib/kubelet/config.json", true},
		{"/var/lib/kubelet/", "/var/lib/kubelet/config.json", true},
		{"/var/lib/kube", "/var/lib/kubelet/config.json", false},
		{"/etc/ssh/ssh_host_*", "/etc/ssh/ssh_host_rsa_key", true},
		{"/etc/ssh/ssh_host_*", "/etc/ssh/sshd_config", false},
	} {
		if got := steps.Covers(tc.changed, tc.p); got != tc.want {
			t.Errorf("Covers(%q, %q) = %v", tc.changed, tc.p, got)
		}
	}
}
