package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/test/registry"
)

func TestRunPushesPayload(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"--registry", reg.Addr(), "--size", "tiny", "--components", "10", "--seed", "3", "--list"}, &out, &errb)
	if err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	var s summary
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if s.Components != 10 || len(s.ComponentList) != 10 || s.UniqueBlobBytes == 0 {
		t.Fatalf("summary %+v", s)
	}
	got, err := exec.Command("skopeo", "inspect", "--tls-verify=false", "--format", "{{.Digest}}", "docker://"+s.Tag).CombinedOutput()
	if err != nil {
		t.Fatalf("skopeo (Debian package skopeo): %v\n%s", err, got)
	}
	if want := s.Release[strings.Index(s.Release, "@")+1:]; strings.TrimSpace(string(got)) != want {
		t.Fatalf("skopeo sees %s, payloadgen says %s", got, want)
	}
}

func TestRunUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--registry", "x:1", "--serve"},
		{"--registry", "x:1", "extra"},
		{"--bogus"},
	} {
		err := run(context.Background(), args, &bytes.Buffer{}, &bytes.Buffer{})
		if !errors.Is(err, errUsage) {
			t.Errorf("args %q: err %v, want usage error", args, err)
		}
	}
}
