package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Every command, given an argument or flag it cannot take, exits 2 with a message, and a
// command group given an unknown subcommand says so: no command prints its help and
// exits 0 for a mistake, and none goes on to do work.
func TestEveryCommandRefusesBadArguments(t *testing.T) {
	var walk func(c *cobra.Command)
	var leaves, groups []*cobra.Command
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			if sub.HasSubCommands() {
				groups = append(groups, sub)
			} else {
				leaves = append(leaves, sub)
			}
			walk(sub)
		}
	}
	walk(newRootCommand(nil, nil))
	if len(leaves) < 30 {
		t.Fatalf("found %d commands; the walk is broken", len(leaves))
	}
	path := func(c *cobra.Command) []string { return strings.Fields(c.CommandPath())[1:] }
	for _, c := range groups {
		args := append(path(c), "no-such-subcommand")
		code, _, stderr := runMain(t, args...)
		if code != exitBadInput || !strings.Contains(stderr, `unknown command "no-such-subcommand"`) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and the unknown command named", args, code, stderr)
		}
	}
	for _, c := range leaves {
		args := append(path(c), "--no-such-flag")
		code, _, stderr := runMain(t, args...)
		if code != exitBadInput || !strings.Contains(stderr, "no-such-flag") {
			t.Errorf("%q: exit %d, stderr %q; want 2 naming the flag", args, code, stderr)
		}
	}
	code, _, stderr := runMain(t, "no-such-command")
	if code != exitBadInput || !strings.Contains(stderr, `unknown command "no-such-command"`) {
		t.Errorf("unknown top-level command: exit %d, %q", code, stderr)
	}
}

// Counts and durations that mean nothing are refused by every command before it runs.
func TestNonsenseCounts(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"seed", "push", "--jobs", "0", ".", "registry.example.com/x:1"}, "--jobs 0: want at least 1"},
		{[]string{"seed", "boot", "--cpus", "-1", "."}, "--cpus -1: want at least 1"},
		{[]string{"seed", "boot", "--timeout", "0s", "."}, "--timeout 0s: want a positive duration"},
		{[]string{"seed", "boot", "--hold", "-1s", "."}, "--hold -1s: want a positive duration"},
		{[]string{"release", "info", "--jobs", "-3", "registry.example.com/r:1"}, "--jobs -3: want at least 1"},
		{[]string{"depot", "run", ".", "--parallel", "0"}, "--parallel 0: want at least 1"},
	} {
		code, _, stderr := runMain(t, tc.args...)
		if code != exitBadInput || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}
