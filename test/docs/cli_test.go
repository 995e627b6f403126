package docs

import (
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"sort"
	"strings"
)

// cliCommand is one command of the real binary as its --help describes it.
type cliCommand struct {
	path     []string
	short    string
	runnable bool
	flags    map[string]bool // "--long" and "-s" forms, global flags included
	children map[string]*cliCommand
}

var (
	helpFlag     = regexp.MustCompile(`(?m)^\s+(?:(-[a-zA-Z]), )?(--[a-z][a-z0-9.-]*)`)
	helpCommands = regexp.MustCompile(`(?m)^Available Commands:\n((?:  \S.*\n)+)`)
	helpUsage    = regexp.MustCompile(`(?m)^Usage:\n((?:  \S.*\n)+)`)
	placeholder  = regexp.MustCompile(`^[A-Z][A-Z_]*$`)
)

// readCLI walks the binary's command tree through --help, from the root down. help and
// completion are cobra's own and are left out.
func readCLI(bin string) (*cliCommand, error) {
	help := func(path []string) (string, error) {
		out, err := exec.Command(bin, append(append([]string{}, path...), "--help")...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("snofactory %s --help: %w\n%s", strings.Join(path, " "), err, out)
		}
		return string(out), nil
	}
	return walkCLI(help, nil, "")
}

func walkCLI(help func([]string) (string, error), path []string, short string) (*cliCommand, error) {
	out, err := help(path)
	if err != nil {
		return nil, err
	}
	c := &cliCommand{path: path, short: short, flags: map[string]bool{}, children: map[string]*cliCommand{}}
	for _, m := range helpFlag.FindAllStringSubmatch(out, -1) {
		c.flags[m[2]] = true
		if m[1] != "" {
			c.flags[m[1]] = true
		}
	}
	if !c.flags["--help"] {
		return nil, fmt.Errorf("snofactory %s --help lists no flags:\n%s", strings.Join(path, " "), out)
	}
	if m := helpUsage.FindStringSubmatch(out); m != nil {
		for _, line := range strings.Split(strings.TrimSpace(m[1]), "\n") {
			c.runnable = c.runnable || !strings.HasSuffix(strings.TrimSpace(line), "[command]")
		}
	}
	if m := helpCommands.FindStringSubmatch(out); m != nil {
		for _, line := range strings.Split(strings.TrimRight(m[1], "\n"), "\n") {
			name, desc, _ := strings.Cut(strings.TrimSpace(line), " ")
			if name == "help" || name == "completion" {
				continue
			}
			child, err := walkCLI(help, append(append([]string{}, path...), name), strings.TrimSpace(desc))
			if err != nil {
				return nil, err
			}
			c.children[name] = child
		}
	}
	return c, nil
}

// all lists the command and everything below it, in name order.
func (c *cliCommand) all() []*cliCommand {
	out := []*cliCommand{c}
	names := make([]string, 0, len(c.children))
	for n := range c.children {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		out = append(out, c.children[n].all()...)
	}
	return out
}

// check reports what the real CLI would not take in args: a word that should name a
// subcommand and does not, arguments to a command that only groups others, or a flag the
// command lacks. A word "a|b" in a subcommand's place stands for both subcommands; an
// upper-case word (COMMAND) stands for any. A group's bare name names it.
func (c *cliCommand) check(args []string) error {
	i := 0
	for ; i < len(args) && !strings.HasPrefix(args[i], "-"); i++ {
		alts := strings.Split(args[i], "|")
		if len(alts) > 1 && c.children[alts[0]] != nil {
			var errs []error
			for _, a := range alts {
				errs = append(errs, c.check(append([]string{a}, args[i+1:]...)))
			}
			return errors.Join(errs...)
		}
		if placeholder.MatchString(args[i]) && len(c.children) > 0 {
			return nil
		}
		child, ok := c.children[args[i]]
		if !ok {
			break
		}
		c = child
	}
	name := strings.TrimSpace("snofactory " + strings.Join(c.path, " "))
	if (!c.runnable || len(c.children) > 0) && i < len(args) {
		if strings.HasPrefix(args[i], "-") {
			return fmt.Errorf("%s needs a subcommand before %s", name, args[i])
		}
		return fmt.Errorf("%s has no subcommand %q", name, args[i])
	}
	var errs []error
	for _, a := range args[i:] {
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			continue
		}
		flag, _, _ := strings.Cut(a, "=")
		if !c.flags[flag] {
			errs = append(errs, fmt.Errorf("%s has no flag %s", name, flag))
		}
	}
	return errors.Join(errs...)
}
