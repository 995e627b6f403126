package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containers/storage/pkg/reexec"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/badinput"
	"github.com/snofactory/snofactory/pipeline/netlimit"
	"github.com/snofactory/snofactory/pipeline/output"
	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
)

// Exit codes are part of the interface: depots script against them.
const (
	exitOK       = 0
	exitFailed   = 1
	exitBadInput = 2
	// exitInterrupted follows the shell's convention for a command ended by SIGINT.
	exitInterrupted = 130
)

func main() {
	// containers/storage re-executes the binary for some operations; this must run first.
	if reexec.Init() {
		return
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(diskpack.HeapLimit)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr)
}

// runContext runs one command line under parent; tests bound it with a deadline.
func runContext(parent context.Context, args []string, stdout, stderr io.Writer) (code int) {
	defer func() {
		// A panic is our bug, never the user's: say so plainly instead of dumping a trace.
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "snofactory: internal error: %v\nThis is a bug in snofactory; please report it with the command you ran.\n", r)
			code = exitFailed
		}
	}()
	// The first Ctrl-C stops the command cleanly; a second kills its tools, and it, at once.
	ctx, stop := pipeline.Interruptible(parent, func() {
		fmt.Fprintln(stderr, "snofactory: interrupted twice: its tools and it stopped at once")
		os.Exit(exitInterrupted)
	})
	defer stop()

	root := newRootCommand(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	if code = exitCode(err); ctx.Err() != nil && (code == exitFailed || errors.Is(err, context.Cause(ctx)) || errors.Is(err, ctx.Err())) {
		// Stopped by Ctrl-C or SIGTERM, having cleaned up, even mid-read of the user's input
		// (a command that ends normally on Ctrl-C, such as seed boot --hold, returns nil).
		code, err = exitInterrupted, fmt.Errorf("interrupted (%v): %w", context.Cause(ctx), err)
	}
	fmt.Fprintln(stderr, "snofactory:", err)
	return code
}

// exitCode is the one place an error becomes an exit code: the user's input (exitBadInput)
// or a failed command (exitFailed).
func exitCode(err error) int {
	var se *pipeline.StageError
	var te *seed.TargetError
	switch {
	case badinput.Is(err), badinput.IsUsage(err):
		return exitBadInput
	case errors.As(err, &se):
		// Whatever went wrong inside a stage, the build failed.
		return exitFailed
	case errors.Is(err, seed.ErrBadSeed), errors.As(err, &te), output.IsRefused(err):
		// A seed that fails verification is untrusted input, whichever command read it
		// (pull, verify, inspect, write, boot): retrying cannot help, another seed can. So
		// is a target refused before anything was written to it.
		return exitBadInput
	case errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTDIR):
		// A path of the wrong kind outside any stage (a directory given to -o FILE, a file
		// given as a directory) came from the command line.
		return exitBadInput
	}
	return exitFailed
}

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "snofactory",
		Short:         "Build relocatable single-node OpenShift seed images from blueprints",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return badInput(err) })
	// Every request to a registry, an API server or a download server fails after this long
	// without progress (pipeline/netlimit); the context carries it to every client.
	stall := root.PersistentFlags().Duration(netlimit.Flag, netlimit.DefaultStallTimeout, "fail a network transfer that makes no progress for this long")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		cmd.SetContext(netlimit.WithStallTimeout(cmd.Context(), *stall))
		return checkCounts(cmd)
	}
	// Each subcommand lives in its own file; add one line here per command.
	// --- commands ---
	root.AddCommand(newValidateCommand())
	root.AddCommand(newDepotCommand())
	root.AddCommand(newSeedCommand())
	root.AddCommand(newKeysCommand())
	root.AddCommand(newSiteConfigCommand())
	root.AddCommand(newSchemaCommand())
	root.AddCommand(newBuildCommand())
	root.AddCommand(newPlanCommand())
	root.AddCommand(newRenderCommand())
	root.AddCommand(newLockCommand())
	root.AddCommand(newAgentCommand())
	root.AddCommand(newISOCommand())
	root.AddCommand(newReleaseCommand())
	root.AddCommand(newVersionCommand())
	root.AddCommand(newCacheCommand())
	root.AddCommand(newClusterCommand())
	// --- end commands ---
	refuseUnknownSubcommands(root)
	return root
}

// checkCounts refuses, for every command, a count or a duration given on the command line
// that means nothing: no command runs with --jobs 0, --cpus -1 or --timeout 0s.
func checkCounts(cmd *cobra.Command) error {
	var problems []string
	cmd.Flags().Visit(func(f *pflag.Flag) {
		switch f.Value.Type() {
		case "int":
			if n, err := strconv.Atoi(f.Value.String()); err == nil && n < 1 {
				problems = append(problems, fmt.Sprintf("--%s %d: want at least 1", f.Name, n))
			}
		case "duration":
			d, err := time.ParseDuration(f.Value.String())
			// --hold and --wait may be 0 (do not hold, do not wait); nothing may be negative.
			if err == nil && (d < 0 || d == 0 && f.Name != "hold" && f.Name != "wait") {
				problems = append(problems, fmt.Sprintf("--%s %s: want a positive duration", f.Name, f.Value))
			}
		}
	})
	if len(problems) > 0 {
		return badInput(errors.New(strings.Join(problems, "; ")))
	}
	return nil
}

// refuseUnknownSubcommands makes every command group refuse an unknown subcommand with
// exit 2, as the root does; cobra would print the group's help and exit 0.
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if !c.HasSubCommands() || c.Run != nil || c.RunE != nil || !c.HasParent() {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return badInput(fmt.Errorf("unknown command %q for %q; see %s --help", args[0], cmd.CommandPath(), cmd.CommandPath()))
		}
		return cmd.Help()
	}
}

// outputFile refuses an output file argument (-o FILE) that output.Check refuses (a
// directory, a character device, a read-only file, one of inputs), before the command does
// any work: the user's input, not a failed command. "" (no output) is fine.
func outputFile(flag, path string, inputs ...string) error {
	err := output.CheckFile(flag, path, inputs...)
	if output.IsRefused(err) {
		return badInput(err)
	}
	return err
}

// badInput marks err as the user's input being wrong, so the process exits with code 2.
func badInput(err error) error { return badinput.Wrap(err) }
